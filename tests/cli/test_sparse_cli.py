"""``commsim sparse``: sparse vs dense ring per density, the dynamic switch to dense shown, the
crossover plot, and bad densities as one line with exit 2."""

from __future__ import annotations

import pytest

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_one_percent_is_below_ring_and_half_goes_dense(cli):
    rc, out, err = cli("sparse", "-p", "4", "-s", "64MiB", "--density", "0.01,50%")
    assert rc == 0, err
    one, half = (line for line in out.splitlines() if "% uniform" in line)
    assert one.endswith(("  static", "  dynamic", "  static = dynamic"))
    assert "sparse/sparse" in one
    assert "dense/dense" in half and half.endswith("  dynamic = ring")
    assert "the allgather goes dense from d = 0.159" in out


def test_json_has_every_density_and_the_switch(cli_json):
    doc = cli_json("sparse", "-p", "4", "-s", "64MiB", "--density", "0.01,0.5")
    (res,) = doc["results"]
    one, half = res["densities"]
    assert one["dynamic_time_s"] < res["ring_time_s"] / 5
    assert (half["dynamic_split"], half["dynamic_allgather"]) == ("dense", "dense")
    assert half["dynamic_time_s"] == pytest.approx(res["ring_time_s"], rel=1e-12)
    assert doc["dynamic_dense_from"]["split"] == 0.5


def test_power_law_is_accepted(cli_json):
    doc = cli_json("sparse", "-p", "8", "-s", "1MiB", "--density", "0.01", "--distribution",
                   "powerlaw", "--exponent", "1.2")  # fmt: skip
    assert doc["results"][0]["densities"][0]["distribution"] == "powerlaw"


def test_the_crossover_plot_is_written(cli, tmp_path):
    path = tmp_path / "crossover.png"
    rc, out, err = cli("sparse", "-p", "4", "-s", "64MiB", "--plot", str(path))
    assert rc == 0, err
    assert path.read_bytes().startswith(PNG_SIGNATURE) and f"plot: {path}" in out


@pytest.mark.parametrize("bad", ["0", "1.5", "-0.1", "150%", "nan", "x"])
def test_density_outside_0_1_is_one_line_and_exit_2(cli, bad):
    rc, out, err = cli("sparse", "-p", "4", "--density", bad)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--density" in err
