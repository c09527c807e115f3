r"""Parse and format the quantities a user types: sizes, times, bandwidths, rank counts.

Every ``parse_*`` function accepts either a string (from a command line or a config file) or, where
it makes sense, a number, which passes through after validation. Every failure raises
:class:`UnitError` (a ``ValueError``) whose message is one line naming the offending text and what
is accepted. Arithmetic on the parsed number is exact (:class:`fractions.Fraction`), so
``parse_size("1.5KiB") == 1536`` and ``parse_time("2us") == 2e-6`` hold exactly.

Grammar (whitespace around tokens and between a number and its unit is ignored)::

    number    := digits ["." digits] [("e" | "E") ["+" | "-"] digits]    (also ".5", "1.")

    size      := number [data-unit]                        -> int bytes, must be whole and >= 0
    data-unit := prefix? B                                 bytes: "64MiB", "1GB", "1gB"
               | prefix? (b | bit | bits)                  bits (divided by 8): "1Gb", "1Gbit"
                 decimal kB/KB, MB, ... are powers of 1000; binary KiB, MiB, ... powers of 1024.
                 One rule for sizes and bandwidths: B (bytes) and b (bits) are told apart by
                 case, the prefix is not; a bare b after a lower-case prefix other than SI's
                 k ("1gb", "64mib") is refused as ambiguous (people write it for bytes as often
                 as for bits): write GB or Gbit. "8kb" is 8 kilobits. A bare prefix ("64K",
                 "1M", "2Gi") is ambiguous too: write KiB or KB.

    sizes     := item ("," item)*                          -> list[int], given order, no repeats
    item      := size | size ".." size [step]              (a range includes its end if reached)
    step      := ":x" int | ":+" size                      (default :x2, i.e. powers of two)

    time      := number [time-unit]                        -> float seconds, finite and >= 0
    time-unit := s | ms | us | µs | ns | ps                (case-insensitive; no unit = seconds)

    inverse-bandwidth (seconds per byte, the Hockney beta or gamma):
              := number data-unit ("/s" | "ps")            bandwidth: B = bytes, b / bit = bits
               | number time-unit "/B"                     time per byte: "40ps/B", "4e-11s/B"
               | number                                    bare number: already seconds per byte
               | "inf"                                     infinitely fast: 0.0 s/B
    prefix    := k | M | G | T | P (decimal) or Ki | Mi | Gi | Ti | Pi (binary); case-insensitive,
                 but the B (bytes) / b (bits) distinction is case-sensitive: "100Gb/s" is
                 12.5 GB/s, and "25gb/s" is refused (the data-unit rule). A zero bandwidth
                 ("0GB/s") is an error; an infinitely fast link is written "inf", "infGB/s",
                 "0s/B" or a bare 0.

    ints      := like sizes, but every value is a plain integer >= 1 (rank counts): "8",
                 "2,4,8", "2..64" (powers of two), "1..16:+1", "3..243:x3".

A list or range expands to at most :data:`MAX_LIST_VALUES` values. Limits, each refused with one
line before any work: a number has at most 64 characters and a decimal exponent within +-400; a size
is at most 2**62 bytes; a time, and a time per byte, at most 1e9 s. Parsing takes time linear in the
text, whatever it holds.

The ``format_*`` functions render numbers for tables and messages: :func:`format_size` uses binary
units and is exact for whole byte counts (``format_size(1536) == "1.5KiB"``), :func:`format_time`
and :func:`format_bandwidth` show three significant digits, the latter in decimal GB/s as
nccl-tests reports. Their finite output parses back with the matching ``parse_*`` function.

Examples:
    >>> parse_size("64MiB"), parse_size("1GB"), parse_size("1.5 KiB")
    (67108864, 1000000000, 1536)
    >>> parse_sizes("1KiB..8KiB,1MiB")
    [1024, 2048, 4096, 8192, 1048576]
    >>> parse_time("2us"), parse_bandwidth_or_inverse("25GB/s"), parse_int_list("2..16")
    (2e-06, 4e-11, [2, 4, 8, 16])
    >>> format_size(67108864), format_time(1.5e-3), format_bandwidth(25e9)
    ('64MiB', '1.50ms', '25.0GB/s')
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from collections.abc import Callable
from fractions import Fraction

from commsim.errors import CommsimError

__all__ = [
    "MAX_LIST_VALUES",
    "UnitError",
    "format_bandwidth",
    "format_size",
    "format_time",
    "parse_bandwidth_or_inverse",
    "parse_int_list",
    "parse_size",
    "parse_sizes",
    "parse_time",
]

#: The most values one :func:`parse_sizes` / :func:`parse_int_list` call may expand to.
MAX_LIST_VALUES = 10_000
MAX_SIZE = 2**62  # bytes; beyond any machine, and safe from int64/float overflow downstream
MAX_TIME = 1e9  # seconds (~32 years): larger is a typo


class UnitError(CommsimError, ValueError):
    """A size, time, bandwidth or list could not be parsed or is out of range.

    The message is one line that quotes the offending text and says what is accepted.

    Examples:
        >>> try:
        ...     parse_size("64MiBs")
        ... except UnitError as e:
        ...     print(e)  # doctest: +ELLIPSIS
        cannot parse size '64MiBs': expected a number with an optional unit B, KB, KiB, ...
    """


# ---------------------------------------------------------------------------------------------
# tables

_AMBIGUOUS_PREFIXES = frozenset([*"kmgtp", *(f"{p}i" for p in "kmgtp")])
_SIZE_ACCEPTED = "B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB, PiB (bytes) or Kb, Gbit, ... (bits)"

_TIME_UNITS: dict[str, Fraction] = {
    "s": Fraction(1),
    "ms": Fraction(1, 10**3),
    "us": Fraction(1, 10**6),
    "\u00b5s": Fraction(1, 10**6),  # MICRO SIGN
    "\u03bcs": Fraction(1, 10**6),  # GREEK SMALL LETTER MU
    "ns": Fraction(1, 10**9),
    "ps": Fraction(1, 10**12),
}
_TIME_ACCEPTED = "s, ms, us (or µs), ns, ps; no unit means seconds"

_RATE_PREFIXES: dict[str, int] = {"": 1}
for _i, _p in enumerate("kmgtp", start=1):
    _RATE_PREFIXES[_p] = 1000**_i
    _RATE_PREFIXES[f"{_p}i"] = 1024**_i
_BANDWIDTH_ACCEPTED = (
    "expected a bandwidth such as 25GB/s, 25GiB/s, 100Gb/s, 100Gbit/s, 400Gbps or 12.5GBps, "
    "a time per byte such as 40ps/B or 4e-11s/B, a bare number of seconds per byte, or inf"
)

# Each pattern is matched against text already stripped at both ends and ends in a greedy
# ``(.*)``: a lazy ``(.*?)\s*`` before the end backtracks quadratically over inner white space
# ("1x" + 100,000 spaces + "x" took minutes).
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_QUANTITY_RE = re.compile(rf"([+-]?{_NUMBER})\s*(.*)", re.DOTALL | re.ASCII)
_ASCII_SPACE = " \t\n\r\f\v"  # what \s matches under re.ASCII
_INF_RE = re.compile(r"\+?(infinity|inf)\s*(.*)", re.IGNORECASE | re.DOTALL)
_INT_RE = re.compile(r"\s*\+?\d+\s*", re.ASCII)
_STEP_RE = re.compile(r"([xX*+])\s*(.*)", re.DOTALL)


# ---------------------------------------------------------------------------------------------
# helpers


_MAX_DIGITS = 64  # characters of one number: more is a typo, and exact arithmetic on it is slow
_MAX_EXPONENT = 400  # |decimal exponent|: past float's range in either direction


def _split_quantity(text: str) -> tuple[Fraction, str] | None:
    """Split ``"1.5 KiB"`` into ``(Fraction(3, 2), "KiB")``; ``None`` if there is no number.

    Numbers too long or with exponents past any float (``1e999999999``) are refused before
    :class:`~fractions.Fraction` builds them exactly, which would take minutes.
    """
    m = _QUANTITY_RE.fullmatch(text.strip(_ASCII_SPACE))
    if m is None:
        return None
    number = m.group(1)
    exponent = number.lower().partition("e")[2]
    if len(number) > _MAX_DIGITS:
        raise UnitError(f"number {number[:20]}... in {text[:40]!r} has too many digits")
    if exponent and abs(int(exponent)) > _MAX_EXPONENT:
        raise UnitError(f"{number!r} is out of range (|exponent| <= {_MAX_EXPONENT})")
    return Fraction(number), m.group(2)


def _plain_int(text: str, context: str) -> int | None:
    """``text`` as a plain decimal integer (ASCII digits, an optional ``+``, white space
    around), or ``None`` if it is not one. More than :data:`_MAX_DIGITS` digits are refused
    before :func:`int`, whose own limit (4300 digits) would raise a bare ValueError."""
    if _INT_RE.fullmatch(text) is None:
        return None
    digits = text.strip(_ASCII_SPACE)
    if len(digits) > _MAX_DIGITS:
        raise UnitError(f"number {digits[:20]}... in {context[:40]!r} has too many digits")
    return int(digits)


def _real(value: object, what: str) -> Fraction:
    """Validate a numeric (non-string) argument and return it exactly."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UnitError(
            f"cannot parse {what} {value!r:.60}: expected a string or a number, "
            f"got {type(value).__name__}"
        )
    try:
        return Fraction(operator.index(value))
    except TypeError:
        pass
    if isinstance(value, numbers.Rational):  # exactly, however large: Fraction(10**400, 3)
        return Fraction(value.numerator, value.denominator)
    try:
        x = float(value)
    except (OverflowError, ValueError):
        raise UnitError(f"{what} {value!r:.40} is out of range") from None
    if not math.isfinite(x):
        raise UnitError(f"{what} must be finite, got {value!r}")
    return Fraction(x)


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _show(value: object) -> str:
    """Quote user input for an error message: strings as ``'...'``, numbers as they print."""
    if isinstance(value, str):
        return _q(value)
    try:
        shown = str(value)
    except ValueError:  # an int past 4300 digits will not print
        return "a number of more than 4300 digits"
    return shown if len(shown) <= _QUOTE_MAX else f"{shown[:20]}... ({len(shown):,} characters)"


_QUOTE_MAX = 60


def _q(text: str) -> str:
    """``text`` quoted for an error message, cut after ``_QUOTE_MAX`` characters: a 100 kB
    argument must not become a 100 kB error line."""
    if len(text) <= _QUOTE_MAX:
        return repr(text)
    return f"{text[:_QUOTE_MAX]!r}... ({len(text):,} characters)"


# ---------------------------------------------------------------------------------------------
# sizes


def _data_unit(unit: str) -> tuple[Fraction | None, str | None]:
    """Bytes in one ``unit`` of data (``"GB"`` -> 1e9, ``"Gb"`` / ``"Gbit"`` -> 1.25e8): the one
    rule of sizes and bandwidths. ``(None, prefix)`` when the unit is an ambiguous bare ``b``
    (after a lower-case prefix other than SI's ``k``: ``"gb"``, ``"mib"``), ``(None, None)``
    when it is not a data unit at all. ``"kb"`` is SI's kilobit, a bare ``"b"`` a bit."""
    low = unit.lower()
    symbol = next((s for s in ("bits", "bit") if low.endswith(s)), None)
    if symbol is not None:
        prefix = _RATE_PREFIXES.get(low[: -len(symbol)])
        return (None if prefix is None else Fraction(prefix, 8)), None
    if not unit.endswith(("B", "b")):
        return None, None
    prefix = unit[:-1]
    multiplier = _RATE_PREFIXES.get(prefix.lower())
    if multiplier is None:
        return None, None
    if unit.endswith("B"):
        return Fraction(multiplier), None
    if prefix and prefix[0].islower() and prefix[0] != "k":
        return None, prefix
    return Fraction(multiplier, 8), None


def _ambiguous_data(text: str, number: Fraction, prefix: str, what: str, per: str = "") -> str:
    """The one-line refusal of an ambiguous bare ``b``: both spellings the user may mean."""
    shown = f"{float(number):g}" if number.denominator != 1 else str(number.numerator)
    p = prefix[:1].upper() + prefix[1:]
    return (
        f"ambiguous {what} {_q(text)}: write {shown}{p}B{per} (bytes) or {shown}{p}bit{per} (bits)"
    )


def _size_from_text(text: str) -> int:
    parsed = _split_quantity(text)
    unit = re.sub(r"\s+", "", parsed[1]) if parsed is not None else ""
    scale, ambiguous = _data_unit(unit) if unit else (Fraction(1), None)
    if parsed is not None and ambiguous is not None:
        raise UnitError(_ambiguous_data(text, parsed[0], ambiguous, "size"))
    if parsed is None or scale is None:
        if unit.lower() in _AMBIGUOUS_PREFIXES:
            p = unit[0].upper()
            raise UnitError(
                f"ambiguous size {_q(text)}: write {p}iB (powers of 1024) or {p}B (powers of 1000)"
            )
        raise UnitError(
            f"cannot parse size {_q(text)}: expected a number with an optional unit "
            f"{_SIZE_ACCEPTED} (e.g. 64MiB)"
        )
    value = parsed[0] * scale
    if value < 0:
        raise UnitError(f"size must be >= 0, got {_q(text)}")
    if value.denominator != 1:
        raise UnitError(f"size {_q(text)} is not a whole number of bytes ({float(value):g} B)")
    return _capped(int(value), text)


def _capped(size: int, text: object) -> int:
    if size > MAX_SIZE:
        raise UnitError(f"size {_show(text)} is too large (the limit is 2**62 bytes, 4EiB)")
    return size


def parse_size(text: str | int | float) -> int:
    """Parse a message size into a whole number of bytes.

    Args:
        text: A number with an optional unit, e.g. ``"64MiB"``, ``"1 GB"`` or ``"4096"``.
            Units are ``B``, decimal ``kB/KB, MB, GB, TB, PB`` (powers of 1000) and binary
            ``KiB, MiB, GiB, TiB, PiB`` (powers of 1024), case-insensitively; no unit means
            bytes. A bare prefix such as ``"64K"`` is rejected as ambiguous. A number (``int``,
            integral ``float``, numpy scalar) is accepted as a count of bytes.

    Returns:
        The size in bytes.

    Raises:
        UnitError: If the text does not parse, the size is negative, or it is not a whole
            number of bytes (``"1.3B"``, ``"0.1KiB"``).

    Examples:
        >>> parse_size("64MiB")
        67108864
        >>> parse_size("1GB"), parse_size("1 kiB"), parse_size("1.5KiB"), parse_size(4096)
        (1000000000, 1024, 1536, 4096)
        >>> parse_size("1Gb"), parse_size("1Gbit")  # bits, as in a bandwidth
        (125000000, 125000000)
        >>> parse_size("1gb")
        Traceback (most recent call last):
            ...
        commsim.units.UnitError: ambiguous size '1gb': write 1GB (bytes) or 1Gbit (bits)
        >>> parse_size("64K")
        Traceback (most recent call last):
            ...
        commsim.units.UnitError: ambiguous size '64K': write KiB (powers of 1024) or KB (powers of 1000)
    """
    if isinstance(text, str):
        return _size_from_text(text)
    value = _real(text, "size")
    if value < 0:
        raise UnitError(f"size must be >= 0, got {_show(text)}")
    if value.denominator != 1:
        raise UnitError(f"size {_show(text)} is not a whole number of bytes")
    return _capped(int(value), text)


# ---------------------------------------------------------------------------------------------
# lists and ranges


def _expand_list(
    text: str,
    parse_one: Callable[[str], int],
    parse_add: Callable[[str], int],
    what: str,
) -> list[int]:
    """Expand ``"a,b,lo..hi[:xF|:+S]"`` with ``parse_one`` for each value; dedupe, keep order."""
    if not text.strip():
        raise UnitError(f"empty {what} list {_q(text)}: expected e.g. {_example(what)}")
    out: dict[int, None] = {}
    total = 0
    for item in text.split(","):
        if not item.strip():
            raise UnitError(f"empty item in {what} list {_q(text)}: remove the extra comma")
        if ".." not in item:
            values = [parse_one(item)]
        else:
            values = _expand_range(item, parse_one, parse_add, what)
        total += len(values)
        if total > MAX_LIST_VALUES:
            raise UnitError(
                f"{what} list {_q(text)} expands to more than {MAX_LIST_VALUES} values: "
                f"use a coarser step"
            )
        out.update(dict.fromkeys(values))
    return list(out)


def _example(what: str) -> str:
    return "'1KiB..1MiB' or '4KiB,64MiB'" if what == "size" else "'8', '2,4,8' or '2..64'"


def _expand_range(
    item: str,
    parse_one: Callable[[str], int],
    parse_add: Callable[[str], int],
    what: str,
) -> list[int]:
    item = item.strip()
    lo_text, _, rest = item.partition("..")
    hi_text, colon, step_text = rest.partition(":")
    if ".." in rest:
        raise UnitError(f"cannot parse {what} range {_q(item)}: expected A..B, A..B:xF or A..B:+S")
    try:
        lo, hi = parse_one(lo_text), parse_one(hi_text)
    except UnitError as e:
        raise UnitError(f"{e} (in range {_q(item)})") from None
    if lo > hi:
        raise UnitError(f"empty {what} range {_q(item)}: the start is larger than the end")
    factor, add = 2, 0
    if colon:
        m = _STEP_RE.fullmatch(step_text.strip())
        if m is None:
            raise UnitError(
                f"cannot parse the step of {what} range {_q(item)}: expected ':xF' (multiply by "
                f"an integer F >= 2) or ':+S' (add S > 0)"
            )
        op, arg = m.groups()
        if op == "+":
            try:
                add = parse_add(arg)
            except UnitError as e:
                raise UnitError(f"bad step in {what} range {_q(item)}: {e}") from None
            if add <= 0:
                raise UnitError(f"the step of {what} range {_q(item)} must be > 0")
        else:
            parsed = _plain_int(arg, item)
            if parsed is None:
                raise UnitError(
                    f"the factor of {what} range {_q(item)} must be an integer >= 2, got {_q(arg)}"
                )
            factor = parsed
            if factor < 2:
                raise UnitError(f"the factor of {what} range {_q(item)} must be an integer >= 2")
    if add:
        count = (hi - lo) // add + 1
        if count > MAX_LIST_VALUES:
            raise UnitError(
                f"{what} range {_q(item)} expands to more than {MAX_LIST_VALUES} values: "
                f"use a coarser step"
            )
        return list(range(lo, hi + 1, add))
    if lo == 0:
        if hi == 0:
            return [0]
        raise UnitError(
            f"{what} range {_q(item)} starts at 0 and multiplies: use an additive step (':+S') "
            f"or list 0 separately ({_q('0,1..' + hi_text.strip())})"
        )
    values = []
    v = lo
    while v <= hi:
        values.append(v)
        v *= factor
    return values


def _step_int(text: str) -> int:
    value = _plain_int(text, text)
    if value is None:
        raise UnitError(f"expected an integer, got {_q(text.strip())}")
    return value


def parse_sizes(text: str | int) -> list[int]:
    """Parse a comma-separated list of sizes and size ranges into byte counts.

    Args:
        text: Items separated by commas. An item is a size (see :func:`parse_size`) or a range
            ``A..B`` (doubling from ``A`` while ``<= B``), ``A..B:xF`` (multiplying by an integer
            ``F >= 2``) or ``A..B:+S`` (adding the size ``S > 0``). A range includes ``B`` when a
            step lands on it. A number is accepted as a single size.

    Returns:
        The sizes in bytes, in the given order, each once.

    Raises:
        UnitError: If an item does not parse, a range is empty (``A > B``) or starts at 0 with a
            multiplicative step, or the list expands to more than :data:`MAX_LIST_VALUES`
            values.

    Examples:
        >>> parse_sizes("1KiB..16KiB")
        [1024, 2048, 4096, 8192, 16384]
        >>> parse_sizes("0,1KiB,1MiB,1KiB")
        [0, 1024, 1048576]
        >>> parse_sizes("1KB..1MB:x10"), parse_sizes("0..3KiB:+1KiB")
        ([1000, 10000, 100000, 1000000], [0, 1024, 2048, 3072])
    """
    if not isinstance(text, str):
        return [parse_size(text)]
    return _expand_list(text, _size_from_text, _size_from_text, "size")


def _rank_count(name: str) -> Callable[[str], int]:
    def parse_one(item: str) -> int:
        value = _plain_int(item, item)
        if value is None or value < 1:
            raise UnitError(f"{name} must be an integer >= 1, got {_q(item)}")
        return value

    return parse_one


def parse_int_list(text: str | int, *, name: str = "p") -> list[int]:
    """Parse a list of positive integers such as rank counts.

    Args:
        text: Integers and ranges separated by commas, with the range forms of
            :func:`parse_sizes`: ``"8"``, ``"2,4,8"``, ``"2..64"`` (powers of two),
            ``"1..16:+1"``, ``"3..243:x3"``. A number is accepted as a single value.
        name: What the values are, for error messages.

    Returns:
        The values, in the given order, each once.

    Raises:
        UnitError: If a value is not an integer >= 1 or a range is invalid (see
            :func:`parse_sizes`).

    Examples:
        >>> parse_int_list("2..64")
        [2, 4, 8, 16, 32, 64]
        >>> parse_int_list("1..4:+1,8")
        [1, 2, 3, 4, 8]
        >>> parse_int_list("2.5")
        Traceback (most recent call last):
            ...
        commsim.units.UnitError: p must be an integer >= 1, got '2.5'
    """
    if not isinstance(text, str):
        value = _real(text, name) if _is_number(text) else None
        if value is None or value.denominator != 1 or value < 1:
            raise UnitError(f"{name} must be an integer >= 1, got {_show(text)}")
        return [int(value)]
    return _expand_list(text, _rank_count(name), _step_int, name)


# ---------------------------------------------------------------------------------------------
# times and bandwidths


def parse_time(text: str | float) -> float:
    """Parse a duration into seconds.

    Args:
        text: A number with an optional unit ``s, ms, us, µs, ns, ps`` (case-insensitive), e.g.
            ``"2us"``, ``"2 µs"``, ``"2.5ns"``; no unit means seconds. A number is taken as
            seconds.

    Returns:
        The duration in seconds (the float nearest the exact value).

    Raises:
        UnitError: If the text does not parse or the time is negative or not finite.

    Examples:
        >>> parse_time("2us"), parse_time("2.5 ns"), parse_time("1ms"), parse_time("0.5")
        (2e-06, 2.5e-09, 0.001, 0.5)
    """
    if not isinstance(text, str):
        value = _real(text, "time")
    else:
        parsed = _split_quantity(text)
        if parsed is None or (parsed[1].lower() not in _TIME_UNITS and parsed[1] != ""):
            raise UnitError(
                f"cannot parse time {_q(text)}: expected a number with an optional unit "
                f"{_TIME_ACCEPTED} (e.g. 2us)"
            )
        value = parsed[0] * _TIME_UNITS.get(parsed[1].lower(), Fraction(1))
    if value < 0:
        raise UnitError(f"time must be >= 0, got {_show(text)}")
    if value > MAX_TIME:
        raise UnitError(f"time {_show(text)} is too large (the limit is {MAX_TIME:g} s)")
    return float(value)


def _rate_unit(unit: str) -> Fraction | None:
    """Bytes per second of one unit of ``unit`` (``"GB/s"`` -> 1e9); ``None`` if not a rate
    (or an ambiguous one: :func:`_ambiguous_bits`)."""
    if not unit.endswith(("/s", "ps")):
        return None
    return _data_unit(unit[:-2])[0]


def _ambiguous_bits(unit: str) -> str | None:
    """The prefix of a rate like ``gb/s`` or ``mbps`` (bare ``b`` after a lower-case prefix or
    none, :func:`_data_unit`): people write it for bytes as often as for bits, so it is refused."""
    if not unit.endswith(("/s", "ps")):
        return None
    return _data_unit(unit[:-2])[1]


def parse_bandwidth_or_inverse(text: str | float) -> float:
    """Parse a link bandwidth, or its inverse, into seconds per byte (a Hockney beta or gamma).

    Args:
        text: One of

            * a bandwidth: ``"25GB/s"`` (decimal, 25e9 B/s), ``"25GiB/s"`` (binary),
              ``"100Gb/s"`` / ``"100Gbit/s"`` / ``"400Gbps"`` (bits: divided by 8),
              ``"12.5GBps"`` (bytes). Prefixes ``k M G T P`` (and ``Ki Mi ...``) are
              case-insensitive; ``B`` (bytes) versus ``b`` (bits) is not, and a bare ``b``
              after a lower-case prefix (``"25gb/s"``, ``"mbps"``) is refused as ambiguous.
            * a time per byte: ``"4e-11s/B"``, ``"0.04ns/B"``, ``"40ps/B"``.
            * a bare number or a Python number: already seconds per byte.
            * ``"inf"`` (or ``"infGB/s"``): an infinitely fast link, 0.0 s/B, as are ``"0s/B"``
              and ``0``. A bare ``"inf"`` means infinite *bandwidth*, not infinite s/B.

    Returns:
        Seconds per byte, ``>= 0``.

    Raises:
        UnitError: If the text does not parse, is negative, is a zero bandwidth
            (``"0GB/s"``: a link that never delivers), or is slower than one byte per
            1e9 seconds.

    Examples:
        >>> parse_bandwidth_or_inverse("25GB/s"), parse_bandwidth_or_inverse("100Gb/s")
        (4e-11, 8e-11)
        >>> parse_bandwidth_or_inverse("40ps/B"), parse_bandwidth_or_inverse("4e-11")
        (4e-11, 4e-11)
        >>> parse_bandwidth_or_inverse("inf"), parse_bandwidth_or_inverse("0s/B")
        (0.0, 0.0)
    """
    if not isinstance(text, str):
        value = _real(text, "inverse bandwidth (s/B)")
        if value < 0:
            raise UnitError(f"inverse bandwidth (s/B) must be >= 0, got {_show(text)}")
        return _seconds_per_byte(value, text)
    inf = _INF_RE.fullmatch(text.strip())
    if inf is not None:
        if inf.group(2) == "" or _rate_unit(re.sub(r"\s+", "", inf.group(2))) is not None:
            return 0.0
        raise UnitError(f"cannot parse bandwidth {_q(text)}: {_BANDWIDTH_ACCEPTED}")
    parsed = _split_quantity(text)
    if parsed is None:
        raise UnitError(f"cannot parse bandwidth {_q(text)}: {_BANDWIDTH_ACCEPTED}")
    number, unit = parsed[0], re.sub(r"\s+", "", parsed[1])
    if number < 0:
        raise UnitError(f"bandwidth must be >= 0, got {_q(text)}")
    if unit == "":
        return _seconds_per_byte(number, text)
    if unit.endswith("/B"):
        per_byte = _TIME_UNITS.get(unit[:-2].lower())
        if per_byte is None:
            raise UnitError(f"cannot parse bandwidth {_q(text)}: {_BANDWIDTH_ACCEPTED}")
        return _seconds_per_byte(number * per_byte, text)
    ambiguous = _ambiguous_bits(unit)
    if ambiguous is not None:
        raise UnitError(_ambiguous_data(text, parsed[0], ambiguous, "bandwidth", "/s"))
    rate = _rate_unit(unit)
    if rate is None:
        raise UnitError(f"cannot parse bandwidth {_q(text)}: {_BANDWIDTH_ACCEPTED}")
    if number == 0:
        raise UnitError(
            f"bandwidth must be > 0, got {_q(text)} (for an infinitely fast link write 'inf' "
            f"or '0s/B')"
        )
    return _seconds_per_byte(1 / (number * rate), text)


def _seconds_per_byte(value: Fraction, text: object) -> float:
    """``value`` s/B as a float, refusing a link slower than a byte per ``MAX_TIME`` seconds
    (past ~1e308 s/B, as ``1e-400GB/s`` is, the float would overflow)."""
    if value > MAX_TIME:
        raise UnitError(
            f"bandwidth {_show(text)} is too slow (the limit is one byte per {MAX_TIME:g} s)"
        )
    return float(value)


# ---------------------------------------------------------------------------------------------
# formatting


def _format_scaled(
    x: float, units: tuple[tuple[float, str], ...], zero: str, *, strip: bool = False
) -> str:
    """Three significant digits in the largest of ``units`` (``(scale, name)``, descending).

    A value that rounds up to 1000 moves to the next larger unit; beyond the largest unit all
    integer digits are shown; below the smallest, exponent notation is used. ``strip`` drops
    trailing zeros (``"1.50"`` -> ``"1.5"``).
    """
    if not math.isfinite(x):
        return str(x)
    if x < 0:
        return "-" + _format_scaled(-x, units, zero, strip=strip)
    if x == 0:
        return zero
    i = next((k for k, (scale, _) in enumerate(units) if x >= scale), len(units) - 1)
    while True:
        scale, name = units[i]
        v = x / scale
        s = f"{v:#.3g}"
        if "e" not in s:
            if strip:
                s = s.rstrip("0")
            return s.rstrip(".") + name
        if v < 1:  # below the smallest unit
            return f"{v:.3g}{name}"
        if i == 0:  # beyond the largest unit
            return f"{v:.0f}{name}"
        i -= 1


_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_BINARY_FORMAT = tuple((float(1024**u), n) for u, n in reversed(list(enumerate(_BINARY_UNITS))))


def _exact_short(v: Fraction) -> str | None:
    """``v >= 1`` written exactly as an integer or with at most three significant digits."""
    if v.denominator == 1:
        return str(v.numerator)
    int_digits = len(str(math.floor(v)))
    if int_digits >= 3:
        return None
    scaled = v * 10 ** (3 - int_digits)
    if scaled.denominator != 1:
        return None
    digits = str(scaled.numerator)
    return f"{digits[:int_digits]}.{digits[int_digits:]}".rstrip("0")


def format_size(nbytes: float, *, exact: bool = True) -> str:
    """Format a byte count with binary units (``B, KiB, ..., PiB``).

    Whole byte counts are shown exactly, in the largest unit in which the count is an integer
    or needs at most three significant digits (``1536 -> "1.5KiB"``, ``1025 * 1024 ->
    "1025KiB"``, ``1000 -> "1000B"``), so :func:`parse_size` reads the result back unchanged.
    Fractional counts (averages), and every count when ``exact=False`` (estimates), are rounded
    to three significant digits in the largest unit (``1.32e12 -> "1.2TiB"``).

    Args:
        nbytes: The number of bytes; may be negative or fractional.
        exact: whole counts exactly (default), or rounded like an estimate.

    Returns:
        The formatted size, e.g. ``"64MiB"``; ``"inf"`` / ``"nan"`` for non-finite input.

    Examples:
        >>> format_size(64 * 2**20), format_size(1536), format_size(0), format_size(1000)
        ('64MiB', '1.5KiB', '0B', '1000B')
        >>> format_size(1025 * 1024), format_size(1e6 / 3), format_size(0.5)
        ('1025KiB', '326KiB', '0.5B')
        >>> format_size(1_320_000_000_000, exact=False), format_size(4100, exact=False)
        ('1.2TiB', '4KiB')
    """
    if not exact:
        return _format_scaled(float(nbytes), _BINARY_FORMAT, "0B", strip=True)
    if isinstance(nbytes, numbers.Integral):
        n: int | None = int(nbytes)
    else:
        x = float(nbytes)
        n = int(x) if x.is_integer() and abs(x) < 2**53 else None
        if n is None:
            return _format_scaled(x, _BINARY_FORMAT, "0B", strip=True)
    if n < 0:
        return "-" + format_size(-n)
    if n == 0:
        return "0B"
    for u in range(len(_BINARY_UNITS) - 1, -1, -1):
        v = Fraction(n, 1024**u)
        if v >= 1 and (s := _exact_short(v)) is not None:
            return s + _BINARY_UNITS[u]
    raise AssertionError("unreachable: every integer is exact in bytes")  # pragma: no cover


_TIME_FORMAT = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps"))
_RATE_FORMAT = (
    (1e15, "PB/s"),
    (1e12, "TB/s"),
    (1e9, "GB/s"),
    (1e6, "MB/s"),
    (1e3, "kB/s"),
    (1.0, "B/s"),
)


def format_time(seconds: float) -> str:
    """Format a duration with three significant digits in ``s, ms, us, ns`` or ``ps``.

    Args:
        seconds: The duration in seconds.

    Returns:
        The formatted time (ASCII ``us`` for microseconds); ``"0s"`` for zero, ``"inf"`` /
        ``"nan"`` for non-finite input.

    Examples:
        >>> format_time(2e-6), format_time(1.5e-3), format_time(3.2), format_time(850e-9)
        ('2.00us', '1.50ms', '3.20s', '850ns')
        >>> format_time(999.7e-6), format_time(4321.0)
        ('1.00ms', '4321s')
    """
    return _format_scaled(float(seconds), _TIME_FORMAT, "0s")


def format_bandwidth(bytes_per_s: float) -> str:
    """Format a bandwidth in decimal units (``B/s ... PB/s``) with three significant digits.

    Decimal units match what nccl-tests reports as GB/s. To show a Hockney ``beta`` (seconds
    per byte) write ``format_bandwidth(1 / beta)``.

    Args:
        bytes_per_s: The bandwidth in bytes per second.

    Returns:
        The formatted bandwidth; ``"0B/s"`` for zero, ``"inf"`` / ``"nan"`` for non-finite input.

    Examples:
        >>> format_bandwidth(25e9), format_bandwidth(1.234e12), format_bandwidth(999.95e6)
        ('25.0GB/s', '1.23TB/s', '1.00GB/s')
    """
    return _format_scaled(float(bytes_per_s), _RATE_FORMAT, "0B/s")
