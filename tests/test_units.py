"""Tests for commsim.units: parsing and formatting of sizes, times, bandwidths and lists."""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import commsim.units as units
from commsim.errors import CommsimError
from commsim.units import (
    MAX_LIST_VALUES,
    UnitError,
    format_bandwidth,
    format_size,
    format_time,
    parse_bandwidth_or_inverse,
    parse_int_list,
    parse_size,
    parse_sizes,
    parse_time,
)

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


def test_doctests_run() -> None:
    result = doctest.testmod(units, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 15
    assert result.failed == 0


def test_error_class() -> None:
    assert issubclass(UnitError, ValueError)
    assert issubclass(UnitError, CommsimError)
    assert set(units.__all__) >= {
        "UnitError",
        "parse_size",
        "parse_sizes",
        "parse_time",
        "parse_bandwidth_or_inverse",
        "parse_int_list",
        "format_size",
        "format_time",
        "format_bandwidth",
    }


# ------------------------------------------------------------------------------------- sizes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("4096", 4096),
        ("1e3", 1000),
        ("64MiB", 64 * MiB),
        ("64miB", 64 * MiB),
        ("64 MiB", 64 * MiB),
        ("  2 GiB  ", 2 * GiB),
        ("1GB", 10**9),
        ("1gB", 10**9),
        ("1Gb", 125 * 10**6),  # bits, the bandwidth parser's rule (issue #26)
        ("1Gbit", 125 * 10**6),
        ("8kb", 1000),  # SI's kilobit, as in 8kb/s
        ("1 KiB", KiB),
        ("1kiB", KiB),
        ("1kB", 1000),
        ("1KB", 1000),
        ("3MB", 3 * 10**6),
        ("1TiB", TiB),
        ("2TB", 2 * 10**12),
        ("1PiB", 1024**5),
        ("1PB", 10**15),
        ("7B", 7),
        ("56b", 7),
        ("1.5KiB", 1536),
        ("0.5MiB", 512 * KiB),
        (".5KiB", 512),
        ("1.KiB", KiB),
        ("1E3kB", 10**6),
        ("+8B", 8),
    ],
)
def test_parse_size_values(text: str, expected: int) -> None:
    value = parse_size(text)
    assert value == expected
    assert type(value) is int


@pytest.mark.parametrize("text", ["1gb", "64mib", "2tb", "1gib"])
def test_sizes_and_bandwidths_refuse_the_same_ambiguous_bits(text: str) -> None:
    with pytest.raises(UnitError, match=f"ambiguous size '{text}'.*B \\(bytes\\) or .*bit"):
        parse_size(text)
    with pytest.raises(UnitError, match="ambiguous bandwidth"):
        parse_bandwidth_or_inverse(f"{text}/s")


@pytest.mark.parametrize("unit", ["B", "KB", "kB", "KiB", "Gb", "Gbit", "kb", "Mibit", "gB"])
def test_one_data_unit_rule_for_sizes_and_bandwidths(unit: str) -> None:
    """A size of 8000 <unit> moved in one second is a bandwidth of 8000 <unit>/s."""
    size = parse_size(f"8000{unit}")
    assert 1 / parse_bandwidth_or_inverse(f"8000{unit}/s") == pytest.approx(size, rel=1e-12)


def test_bits_that_are_not_whole_bytes_are_refused() -> None:
    with pytest.raises(UnitError, match="not a whole number of bytes"):
        parse_size("7b")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4096, 4096), (0, 0), (1536.0, 1536), (np.int64(64), 64), (np.float64(8.0), 8)],
)
def test_parse_size_numbers_pass_through(value: object, expected: int) -> None:
    result = parse_size(value)  # type: ignore[arg-type]
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("64MiBs", "cannot parse size '64MiBs': expected a number with an optional unit B, KB"),
        ("abc", "cannot parse size 'abc'"),
        ("", "cannot parse size ''"),
        ("MiB", "cannot parse size 'MiB'"),
        ("1 2KiB", "cannot parse size '1 2KiB'"),
        ("64K", "ambiguous size '64K': write KiB (powers of 1024) or KB (powers of 1000)"),
        ("1M", "ambiguous size '1M': write MiB"),
        ("2g", "ambiguous size '2g': write GiB"),
        ("2Gi", "ambiguous size '2Gi': write GiB"),
        ("1T", "ambiguous size '1T'"),
        ("-5", "size must be >= 0, got '-5'"),
        ("-1KiB", "size must be >= 0, got '-1KiB'"),
        ("1.3B", "size '1.3B' is not a whole number of bytes"),
        ("0.1KiB", "size '0.1KiB' is not a whole number of bytes (102.4 B)"),
        ("1e-3KiB", "size '1e-3KiB' is not a whole number of bytes"),
        ("inf", "cannot parse size 'inf'"),
        ("nan", "cannot parse size 'nan'"),
    ],
)
def test_parse_size_errors(text: str, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_size(text)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (-1, "size must be >= 0, got -1"),
        (1.5, "size 1.5 is not a whole number of bytes"),
        (float("inf"), "size must be finite"),
        (float("nan"), "size must be finite"),
        (True, "cannot parse size True"),
        (None, "cannot parse size None: expected a string or a number, got NoneType"),
        ([1], "got list"),
    ],
)
def test_parse_size_bad_numbers(value: object, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_size(value)  # type: ignore[arg-type]
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------------- lists


def test_parse_sizes_forms() -> None:
    assert parse_sizes("1KiB..1MiB") == [KiB * 2**i for i in range(11)]
    assert parse_sizes("1KiB,1MiB") == [KiB, MiB]
    assert parse_sizes("0") == [0]
    assert parse_sizes("0,4") == [0, 4]
    assert parse_sizes("1KiB..3KiB") == [1024, 2048]  # end not reached by doubling
    assert parse_sizes("1KiB..1KiB") == [1024]
    assert parse_sizes("0..0") == [0]
    assert parse_sizes("1KB..1MB:x10") == [10**3, 10**4, 10**5, 10**6]
    assert parse_sizes("1..100:x3") == [1, 3, 9, 27, 81]
    assert parse_sizes("1..16:*4") == [1, 4, 16]
    assert parse_sizes("1..16:X4") == [1, 4, 16]
    assert parse_sizes("0..3KiB:+1KiB") == [0, KiB, 2 * KiB, 3 * KiB]
    assert parse_sizes("1KiB..4KiB:+1500") == [1024, 2524, 4024]
    assert parse_sizes(" 1KiB .. 4KiB : x 2 , 8KiB ") == [KiB, 2 * KiB, 4 * KiB, 8 * KiB]
    assert parse_sizes(4096) == [4096]


def test_parse_sizes_dedupes_keeping_order() -> None:
    assert parse_sizes("4KiB,1KiB..8KiB,1024") == [4096, 1024, 2048, 8192]
    assert parse_sizes("1MiB,1KiB,1MiB") == [MiB, KiB]


def test_parse_sizes_cap() -> None:
    assert len(parse_sizes(f"1..{MAX_LIST_VALUES}:+1")) == MAX_LIST_VALUES
    with pytest.raises(UnitError, match="expands to more than 10000 values"):
        parse_sizes(f"1..{MAX_LIST_VALUES + 1}:+1")
    with pytest.raises(UnitError, match="expands to more than 10000 values"):
        parse_sizes("0..1e15:+1")  # refused before building anything
    with pytest.raises(UnitError, match="expands to more than 10000 values"):
        parse_sizes(",".join(str(i) for i in range(MAX_LIST_VALUES + 1)))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty size list ''"),
        ("  ", "empty size list '  '"),
        ("1KiB,,2KiB", "empty item in size list '1KiB,,2KiB'"),
        ("1KiB,", "empty item in size list '1KiB,'"),
        ("2KiB..1KiB", "empty size range '2KiB..1KiB': the start is larger than the end"),
        ("0..1MiB", "size range '0..1MiB' starts at 0 and multiplies"),
        ("1KiB..", "cannot parse size '': expected"),
        ("1KiB..", "(in range '1KiB..')"),
        ("1KiB..2Q", "cannot parse size '2Q'"),
        ("1K..2KiB", "ambiguous size '1K'"),
        ("1..2..3", "cannot parse size range '1..2..3'"),
        ("1KiB..4KiB:", "cannot parse the step of size range '1KiB..4KiB:'"),
        ("1KiB..4KiB:y2", "cannot parse the step of size range '1KiB..4KiB:y2'"),
        ("1KiB..4KiB:x1", "the factor of size range '1KiB..4KiB:x1' must be an integer >= 2"),
        ("1KiB..4KiB:x0", "must be an integer >= 2"),
        ("1KiB..4KiB:x2.5", "must be an integer >= 2, got '2.5'"),
        ("1KiB..4KiB:+0", "the step of size range '1KiB..4KiB:+0' must be > 0"),
        ("1KiB..4KiB:+1Q", "bad step in size range '1KiB..4KiB:+1Q': cannot parse size '1Q'"),
        ("64MiBs,1KiB", "cannot parse size '64MiBs'"),
    ],
)
def test_parse_sizes_errors(text: str, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_sizes(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_parse_int_list_forms() -> None:
    assert parse_int_list("8") == [8]
    assert parse_int_list("2,4,8") == [2, 4, 8]
    assert parse_int_list("2..64") == [2, 4, 8, 16, 32, 64]
    assert parse_int_list("2..100") == [2, 4, 8, 16, 32, 64]
    assert parse_int_list("1..16:+1") == list(range(1, 17))
    assert parse_int_list("1..10:+3") == [1, 4, 7, 10]
    assert parse_int_list("3..243:x3") == [3, 9, 27, 81, 243]
    assert parse_int_list(" 8 , 2..4 , 8 ") == [8, 2, 4]
    assert parse_int_list(16) == [16]
    assert parse_int_list(np.int32(4)) == [4]  # type: ignore[arg-type]
    assert parse_int_list(4.0) == [4]  # type: ignore[arg-type]
    assert all(type(v) is int for v in parse_int_list("1..8,3"))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2.5", "p must be an integer >= 1, got '2.5'"),
        ("0", "p must be an integer >= 1, got '0'"),
        ("-4", "p must be an integer >= 1, got '-4'"),
        ("8KiB", "p must be an integer >= 1, got '8KiB'"),
        ("1e3", "p must be an integer >= 1, got '1e3'"),
        ("2,x", "p must be an integer >= 1, got 'x'"),
        ("0..8", "p must be an integer >= 1, got '0'"),
        ("", "empty p list ''"),
        ("8..2", "empty p range '8..2'"),
        ("1..4:+0", "the step of p range '1..4:+0' must be > 0"),
        ("1..4:+1.5", "bad step in p range '1..4:+1.5': expected an integer, got '1.5'"),
        ("1..4:x1", "the factor of p range '1..4:x1' must be an integer >= 2"),
        ("1..100000:+1", "expands to more than 10000 values"),
    ],
)
def test_parse_int_list_errors(text: str, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_int_list(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(2.5, "got 2.5"), (0, "got 0"), (True, "got True"), ("1.0", "got '1.0'")],
)
def test_parse_int_list_bad_values(value: object, fragment: str) -> None:
    with pytest.raises(UnitError, match="p must be an integer >= 1") as info:
        parse_int_list(value)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_parse_int_list_name() -> None:
    with pytest.raises(UnitError, match=r"^nodes must be an integer >= 1, got '0'$"):
        parse_int_list("0", name="nodes")


# ------------------------------------------------------------------------------------- times


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2us", 2e-6),
        ("2 us", 2e-6),
        ("2US", 2e-6),
        ("2 \u00b5s", 2e-6),  # micro sign
        ("2\u03bcs", 2e-6),  # greek mu
        ("2.5ns", 2.5e-9),
        ("1ms", 1e-3),
        ("3s", 3.0),
        ("0.5", 0.5),
        ("0", 0.0),
        ("40ps", 40e-12),
        ("1e-6", 1e-6),
        ("1.5e3us", 1.5e-3),
    ],
)
def test_parse_time_values(text: str, expected: float) -> None:
    value = parse_time(text)
    assert value == expected  # exact: computed as a fraction, rounded once
    assert type(value) is float


def test_parse_time_numbers() -> None:
    assert parse_time(1e-6) == 1e-6
    assert parse_time(0) == 0.0
    assert parse_time(np.float64(2.5e-6)) == 2.5e-6
    assert type(parse_time(3)) is float


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("-1us", "time must be >= 0, got '-1us'"),
        ("1 min", "cannot parse time '1 min': expected a number with an optional unit s, ms"),
        ("2usec", "cannot parse time '2usec'"),
        ("us", "cannot parse time 'us'"),
        ("inf", "cannot parse time 'inf'"),
        ("", "cannot parse time ''"),
        (-1.0, "time must be >= 0, got -1.0"),
        (float("inf"), "time must be finite"),
        (float("nan"), "time must be finite"),
        ("2 bananas", "cannot parse time '2 bananas'"),
    ],
)
def test_parse_time_errors(value: object, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_time(value)  # type: ignore[arg-type]
    assert fragment in str(info.value)


# -------------------------------------------------------------------------------- bandwidths


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("25GB/s", 4e-11),
        ("25 GB/s", 4e-11),
        ("25 GB / s", 4e-11),
        ("25gB/s", 4e-11),
        ("25GiB/s", 1 / (25 * 2**30)),
        ("100Gb/s", 8e-11),
        ("100Gbit/s", 8e-11),
        ("100Gbits/s", 8e-11),
        ("400Gbps", 2e-11),
        ("12.5GBps", 8e-11),
        ("1B/s", 1.0),
        ("8b/s", 1.0),
        ("1kB/s", 1e-3),
        ("1KB/s", 1e-3),
        ("1KiB/s", 1 / 1024),
        ("2MB/s", 5e-7),
        ("1TB/s", 1e-12),
        ("4e-11s/B", 4e-11),
        ("0.04ns/B", 4e-11),
        ("40ps/B", 4e-11),
        ("40 ps/B", 4e-11),
        ("0.5us/B", 5e-7),
        ("4e-11", 4e-11),
        ("0", 0.0),
        ("0s/B", 0.0),
        ("inf", 0.0),
        ("Infinity", 0.0),
        ("infGB/s", 0.0),
        ("inf Gbps", 0.0),
    ],
)
def test_parse_bandwidth_values(text: str, expected: float) -> None:
    value = parse_bandwidth_or_inverse(text)
    assert value == pytest.approx(expected, rel=1e-15, abs=0)
    assert type(value) is float


def test_parse_bandwidth_exact_and_numbers() -> None:
    # correctly rounded, not 1/25e9 computed in floating point by luck
    assert parse_bandwidth_or_inverse("25GB/s") == 4e-11
    assert parse_bandwidth_or_inverse("40ps/B") == 4e-11
    assert parse_bandwidth_or_inverse(4e-11) == 4e-11
    assert parse_bandwidth_or_inverse(0) == 0.0
    assert parse_bandwidth_or_inverse(np.float32(0.5)) == 0.5


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("0GB/s", "bandwidth must be > 0, got '0GB/s'"),
        ("0Gbps", "bandwidth must be > 0, got '0Gbps'"),
        ("-1GB/s", "bandwidth must be >= 0, got '-1GB/s'"),
        ("-4e-11", "bandwidth must be >= 0, got '-4e-11'"),
        ("25XB/s", "cannot parse bandwidth '25XB/s': expected a bandwidth such as 25GB/s"),
        ("25GB", "cannot parse bandwidth '25GB'"),
        ("25G/s", "cannot parse bandwidth '25G/s'"),
        ("40ps", "cannot parse bandwidth '40ps'"),
        ("40ps/b", "cannot parse bandwidth '40ps/b'"),
        ("40min/B", "cannot parse bandwidth '40min/B'"),
        ("infs/B", "cannot parse bandwidth 'infs/B'"),
        ("nan", "cannot parse bandwidth 'nan'"),
        ("", "cannot parse bandwidth ''"),
        ("fast", "cannot parse bandwidth 'fast'"),
        (-1.0, "must be >= 0, got -1.0"),
        (float("inf"), "must be finite"),
        ("GB/s", "cannot parse bandwidth 'GB/s'"),
    ],
)
def test_parse_bandwidth_errors(value: object, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_bandwidth_or_inverse(value)  # type: ignore[arg-type]
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("nbytes", "expected"),
    [
        (0, "0B"),
        (1, "1B"),
        (1000, "1000B"),
        (1023, "1023B"),
        (1024, "1KiB"),
        (1536, "1.5KiB"),
        (1280, "1.25KiB"),
        (1152, "1152B"),  # 1.125KiB needs four digits: exact in bytes instead
        (1025 * KiB, "1025KiB"),
        (MiB - 1, "1048575B"),
        (64 * MiB, "64MiB"),
        (768 * MiB, "768MiB"),
        (GiB, "1GiB"),
        (3 * TiB, "3TiB"),
        (1024**5, "1PiB"),
        (1024**6, "1024PiB"),
        (1536.0, "1.5KiB"),
        (np.int64(2048), "2KiB"),
        (0.5, "0.5B"),
        (1e6 / 3, "326KiB"),
        (1.25e9 + 0.5, "1.16GiB"),
        (-1536, "-1.5KiB"),
        (float("inf"), "inf"),
        (float("nan"), "nan"),
    ],
)
def test_format_size(nbytes: float, expected: str) -> None:
    assert format_size(nbytes) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (2e-6, "2.00us"),
        (1.5e-3, "1.50ms"),
        (3.2, "3.20s"),
        (850e-9, "850ns"),
        (1e-9, "1.00ns"),
        (12.345e-6, "12.3us"),
        (999.4e-6, "999us"),
        (999.7e-6, "1.00ms"),  # rounds up into the next unit
        (1.5e-12, "1.50ps"),
        (1e-15, "0.00100ps"),
        (4321.0, "4321s"),
        (-2e-6, "-2.00us"),
        (float("inf"), "inf"),
    ],
)
def test_format_time(seconds: float, expected: str) -> None:
    assert format_time(seconds) == expected


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (0, "0B/s"),
        (25e9, "25.0GB/s"),
        (1.234e12, "1.23TB/s"),
        (999.95e6, "1.00GB/s"),
        (12.5e9, "12.5GB/s"),
        (150e6, "150MB/s"),
        (1.0, "1.00B/s"),
        (2500.0, "2.50kB/s"),
        (1e18, "1000PB/s"),
        (float("inf"), "inf"),
    ],
)
def test_format_bandwidth(rate: float, expected: str) -> None:
    assert format_bandwidth(rate) == expected


# --------------------------------------------------------------------------------- round trips


@given(k=st.integers(min_value=0, max_value=4096), i=st.integers(min_value=0, max_value=5))
def test_size_round_trip_powers(k: int, i: int) -> None:
    n = k * 1024**i
    assert parse_size(format_size(n)) == n


@given(n=st.integers(min_value=0, max_value=2**62))
def test_size_round_trip_any_integer(n: int) -> None:
    text = format_size(n)
    assert parse_size(text) == n
    assert parse_sizes(text) == [n]


@given(seconds=st.floats(min_value=1e-12, max_value=999.0))
def test_time_round_trip(seconds: float) -> None:
    assert parse_time(format_time(seconds)) == pytest.approx(seconds, rel=5e-3)


@given(rate=st.floats(min_value=1.0, max_value=1e15))
def test_bandwidth_round_trip(rate: float) -> None:
    beta = parse_bandwidth_or_inverse(format_bandwidth(rate))
    assert 1 / beta == pytest.approx(rate, rel=5e-3)


@given(
    lo=st.integers(min_value=1, max_value=2**20),
    span=st.integers(min_value=0, max_value=2**30),
    factor=st.integers(min_value=2, max_value=10),
)
def test_multiplicative_range_property(lo: int, span: int, factor: int) -> None:
    hi = lo + span
    values = parse_sizes(f"{lo}..{hi}:x{factor}")
    assert values[0] == lo
    assert all(b == a * factor for a, b in itertools.pairwise(values))
    assert values[-1] <= hi < values[-1] * factor
    assert parse_int_list(f"{lo}..{hi}:x{factor}") == values


@given(
    lo=st.integers(min_value=1, max_value=1000),
    span=st.integers(min_value=0, max_value=5000),
    step=st.integers(min_value=1, max_value=100),
)
def test_additive_range_property(lo: int, span: int, step: int) -> None:
    assert parse_int_list(f"{lo}..{lo + span}:+{step}") == list(range(lo, lo + span + 1, step))


@pytest.mark.parametrize("text", ["2us", "1.50ms", "850ns", "3.20s", "40ps"])
def test_format_time_of_parsed_text_is_stable(text: str) -> None:
    formatted = format_time(parse_time(text))
    assert math.isclose(parse_time(formatted), parse_time(text), rel_tol=5e-3)
    assert format_time(parse_time(formatted)) == formatted
