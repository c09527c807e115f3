"""``commsim tune`` and ``commsim compare --tune``: the table, --json, -o, and one-line errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import commsim
from commsim.models import Hockney
from commsim.tuner import TunerTable, sweep


def test_tune_prints_the_table_and_writes_a_loadable_file(cli, tmp_path):
    out_file = tmp_path / "table.toml"
    rc, out, err = cli(
        "tune", "-c", "allreduce", "-p", "64", "-s", "1KiB..1GiB", "-o", str(out_file)
    )
    assert rc == 0, err
    table = TunerTable.load(out_file)
    assert (table.collective, table.nranks) == ("allreduce", 64)
    for header in ("sizes", "algorithm", "params", "time", "busbw", "runner-up", "margin"):
        assert header in out
    for r in table.ranges:
        assert r.algorithm in out
    assert "1KiB.." in out and "..1GiB" in out and f"table written to {out_file}" in out
    # the same choice as the library's tune with the command line's default model
    assert table == commsim.tune("allreduce", Hockney(), 64, "1KiB..1GiB")


def test_tune_json_is_the_table(cli_json):
    doc = cli_json("tune", "-c", "broadcast", "-p", "16", "-s", "1KiB..1GiB:x16", "--alpha", "5us")
    assert doc["collective"] == "broadcast" and doc["nranks"] == 16
    assert doc["model"]["alpha_s"] == pytest.approx(5e-6)
    ranges = doc["ranges"]
    assert ranges[0]["min_bytes"] == 1024 and ranges[-1]["max_bytes"] == 2**30
    assert all(b["min_bytes"] == a["max_bytes"] + 1 for a, b in itertools.pairwise(ranges))
    chain = [r["params"]["segments"] for r in ranges if r["algorithm"] == "chain"]
    assert chain and chain == sorted(chain)


def test_tune_on_a_cluster_uses_its_servers(cli_json):
    doc = cli_json("tune", "-c", "allreduce", "--cluster", "dgx-h100:2", "-a", "hierarchical,ring",
                   "-s", "1MiB,1GiB")  # fmt: skip
    assert doc["nranks"] == 16 and doc["model"]["name"] == "topology"
    for r in doc["ranges"]:
        if r["algorithm"] == "hierarchical":
            assert r["params"]["ranks_per_node"] == 8


def test_tune_param_lists_are_the_candidates(cli_json):
    doc = cli_json("tune", "-c", "broadcast", "-p", "32", "-a", "chain", "--param", "segments=2,64",
                   "-s", "1KiB,1GiB")  # fmt: skip
    assert [r["params"]["segments"] for r in doc["ranges"]] == [2, 64]


@pytest.mark.parametrize(
    "argv",
    [
        ("-c", "allreduce"),  # no -p
        ("-c", "allreduc", "-p", "8"),
        ("-c", "allreduce", "-p", "8", "-a", "rign"),
        ("-c", "allreduce", "-p", "8,16"),
        ("-c", "allreduce", "-p", "8", "--param", "segmentz=4"),
        ("-c", "allreduce", "-p", "8", "--param", "segments=4,x"),
        ("-c", "allreduce", "-p", "8", "-s", "1KiBB"),
        ("-c", "broadcast", "-p", "8", "--root", "1"),
        ("-c", "allreduce", "-p", "8", "-o", "/no/such/dir/t.toml"),
        ("-c", "allreduce", "-p", "8", "--cluster", "dgx-h999:2"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, argv):
    rc, out, err = cli("tune", *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err


def test_compare_tune_shows_the_winning_segments(cli, cli_json):
    argv = ("compare", "-c", "allreduce", "-p", "256", "-a", "ring,double_binary_tree",
            "-s", "1KiB,1MiB,1GiB", "--tune")  # fmt: skip
    rc, out, err = cli(*argv)
    assert rc == 0, err
    assert "double_binary_tree tuned" in out and "segments=1" in out
    doc = cli_json(*argv)
    [panel] = doc["results"]
    tuned = panel["tuned_params"]["double_binary_tree"]
    depths = [int(t.split("=")[1]) for t in tuned]
    assert depths == sorted(depths) and depths[-1] > 4
    # the tuned times are the best of the tuner's candidates for that algorithm
    result = sweep(
        "allreduce", Hockney(), 256, [1024, 2**20, 2**30], algorithms=["double_binary_tree"]
    )
    best = result.times[result.best(), np.arange(3)]
    assert panel["time_s"]["double_binary_tree"] == pytest.approx(best.tolist(), rel=1e-12)
    # without --tune the default 4 segments: slower at 1 GiB
    plain = cli_json(*argv[:-1])["results"][0]
    assert plain["time_s"]["double_binary_tree"][-1] > 2 * best[-1]
    assert plain["tuned_params"] == {}


def test_compare_tune_grows_pipeline_on_hierarchical_and_switch_rows(cli, cli_json):
    """``pipeline`` is a grown parameter as ``segments`` is: compare --tune sweeps it for the
    hierarchical rows and for an in-network row (tuned on its GPUs, the tuner adding the switch
    helpers), and the winner's "limited by" comes from the winning candidate."""
    argv = ("compare", "-c", "allreduce", "--cluster", "dgx-h100:4", "-a", "hierarchical,nvls_tree",
            "-s", "1MiB,1GiB", "--tune")  # fmt: skip
    doc = cli_json(*argv)
    [panel] = doc["results"]
    assert set(panel["tuned_params"]) == {"hierarchical", "nvls_tree"}
    depth = int(panel["tuned_params"]["nvls_tree"][-1].split("=")[1])
    assert panel["tuned_params"]["nvls_tree"][-1].startswith("pipeline=") and depth > 1
    plain = cli_json(*argv[:-1])["results"][0]
    assert panel["time_s"]["nvls_tree"][-1] < plain["time_s"]["nvls_tree"][-1]
    rc, out, _ = cli(*argv)
    row = next(line for line in out.splitlines() if line.lstrip().startswith("1GiB"))
    assert rc == 0 and " nvlink " in row and " - " not in row, out


def test_compare_tune_keeps_a_switch_row_untuned_where_the_model_has_no_switch(cli_json):
    """Hockney places no helper on a switch: --tune leaves nvls_tree as built (it failed the
    whole command once) and still tunes the rest."""
    doc = cli_json("compare", "-c", "allreduce", "-p", "16", "-a", "ring,nvls_tree,nccl_tree",
                   "-s", "1MiB,1GiB", "--tune")  # fmt: skip
    [panel] = doc["results"]
    assert "nvls_tree" in panel["time_s"] and "nvls_tree" not in panel["tuned_params"]
    assert "nccl_tree" in panel["tuned_params"]
