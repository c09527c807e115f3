"""commsim._toml, the one TOML value writer: every value it writes reads back equal."""

from __future__ import annotations

import datetime
import math

import numpy as np
import pytest
import tomllib
from hypothesis import given
from hypothesis import strategies as st

from commsim._toml import key, value
from commsim.clusters import to_toml as cluster_toml
from commsim.errors import ParameterError

_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # no lone surrogates
_SCALARS = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    _TEXT,
    st.dates(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(_VALUES)
def test_every_value_reads_back_equal(v):
    assert tomllib.loads(f"x = {value(v)}")["x"] == v


@given(st.dictionaries(_TEXT, st.integers(), max_size=5))
def test_every_key_reads_back_equal(d):
    text = "\n".join(f"{key(k)} = {value(x)}" for k, x in d.items())
    assert tomllib.loads(text) == d


@given(st.floats(allow_nan=False))
def test_floats_round_trip_bit_for_bit(f):
    back = tomllib.loads(f"x = {value(f)}")["x"]
    assert back == f and math.copysign(1, back) == math.copysign(1, f)


def test_non_finite_numpy_and_tuples():
    assert [value(x) for x in (float("nan"), -np.inf, np.float64(0.1), np.int32(7))] == [
        "nan", "-inf", "0.1", "7",
    ]  # fmt: skip
    assert value((1, "a", [True])) == '[1, "a", [true]]'
    assert value(datetime.date(2026, 1, 2)) == "2026-01-02"
    emoji = "\U0001f600"
    assert value(emoji) == '"\\U0001F600"' and tomllib.loads("x = " + value(emoji))["x"] == emoji


@pytest.mark.parametrize("bad", [None, object(), {1, 2}])
def test_what_toml_cannot_hold_is_one_error(bad):
    with pytest.raises(ParameterError, match=r"cannot write .* as a TOML value"):
        value(bad)


def test_a_fitted_cluster_file_quotes_keys_and_escapes_strings():
    """What the cluster fit used to write wrong: a key that is not bare, a newline in a string,
    an inline table inside a list."""
    d = {"name": "lab\nrack", "nodes": 2, "links": [{"a": 1}], "intra": {"my link": {"x": 1.5}}}
    assert tomllib.loads(cluster_toml(d)) == d
