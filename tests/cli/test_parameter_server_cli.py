"""``servers=`` on the command line: out of range is one line and exit 2; the parameter-server row
beside ring in ``compare`` and with its formula and sources in ``algorithms``."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value", ["9", "0"])
def test_cli_servers_out_of_range_is_one_line_and_exit_2(cli, value):
    rc, out, err = cli(
        "predict", "-c", "allreduce", "-a", "parameter_server", "-p", "8", "--param",
        f"servers={value}", "-s", "1MiB",
    )  # fmt: skip
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "servers must be in [1, 8]" in err


def test_cli_compare_puts_parameter_servers_beside_ring(cli_json):
    doc = cli_json(
        "compare", "-c", "allreduce", "-a", "ring,parameter_server", "-p", "8", "-s", "64MiB",
        "--param", "servers=2",
    )  # fmt: skip
    (res,) = doc["results"]
    ring, ps = res["time_s"]["ring"][0], res["time_s"]["parameter_server"][0]
    assert res["winner"] == ["ring"] and ps > ring


def test_cli_algorithms_shows_the_formula_and_sources(cli):
    rc, out, _ = cli("algorithms", "-c", "allreduce", "-a", "parameter_server")
    assert rc == 0
    assert "colocated: 2(p-1)α + (p-1)/k·n(2β + γ)" in out
    assert "Li et al., OSDI 2014" in out and "BytePS" in out
