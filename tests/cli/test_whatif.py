"""``commsim whatif``: a grid of what-if clusters through the JAX twin."""

from __future__ import annotations

import pytest


def test_hockney_grid_follows_the_closed_form(cli_json):
    p, n = 8, 2**20
    a, b, g = 2e-6, 1 / 25e9, 1 / 100e9
    doc = cli_json(
        "whatif", "-c", "allreduce", "-a", "ring", "-p", str(p), "-s", "1MiB",
        "--vary", "alpha=0.5x..2x", "--vary", "bandwidth=1x,4x",
    )  # fmt: skip
    assert len(doc["results"]) == 3 * 2
    for row in doc["results"]:
        fa, fb = row["point"]["alpha"], row["point"]["bandwidth"]
        want = 2 * (p - 1) * a * fa + 2 * (p - 1) / p * n * b / fb + (p - 1) / p * n * g
        assert row["time_s"]["ring"] == pytest.approx(want, rel=1e-12)


def test_the_winner_change_is_reported(cli):
    code, out, _ = cli(
        "whatif", "-c", "allreduce", "-a", "ring,recursive_doubling", "-p", "16",
        "-s", "64KiB", "--vary", "alpha=0.01x,1x,100x",
    )  # fmt: skip
    assert code == 0
    assert "winner changes" in out  # latency-bound recursive doubling loses when alpha is tiny


@pytest.mark.parametrize(
    ("vary", "match"),
    [
        ("rail.bandwidth", "expected NAME=FACTORS"),
        ("nope=2x", "unknown parameter 'nope'"),
        ("alpha=two", "not a factor"),
        ("alpha=4x..1x", "runs backwards"),
    ],
)
def test_bad_vary_is_one_line(cli, vary, match):
    code, _, err = cli("whatif", "-c", "allreduce", "-a", "ring", "-p", "4", "--vary", vary)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


def test_node_counts_rebuild_the_cluster_and_match_predict(cli_json):
    """--vary nodes=2,4: each point is the cluster at that node count, its ranks and schedule
    rebuilt; the twin's time equals `predict --set nodes=N` (the compiled model) to 1e-9."""
    doc = cli_json(
        "whatif", "-c", "allreduce", "-a", "ring,hierarchical", "--cluster", "dgx-h100:2",
        "-s", "64MiB", "--vary", "nodes=2,4", "--vary", "nvlink.bandwidth=1x,2x",
    )  # fmt: skip
    assert [(r["point"]["nodes"], r["nranks"]) for r in doc["results"]] == [
        (2, 16), (2, 16), (4, 32), (4, 32)
    ]  # fmt: skip
    for row in doc["results"]:
        if row["point"]["nvlink.bandwidth"] != 1:
            continue
        nodes = int(row["point"]["nodes"])
        want = cli_json(
            "predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:2",
            "--set", f"nodes={nodes}", "-s", "64MiB",
        )["results"][0]["time_s"]  # fmt: skip
        assert row["time_s"]["ring"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--cluster", "dgx-h100:2", "--vary", "nodes=0..4"], "whole numbers >= 1"),
        (["--cluster", "dgx-h100:2", "--vary", "nodes=8..2"], "whole numbers >= 1"),
        (["--cluster", "dgx-h100:2", "--vary", "nodes=2x"], "whole numbers >= 1"),
        (["-p", "8", "--vary", "nodes=2,4"], "needs --cluster"),
        (["--cluster", "dgx-h100:2", "-p", "16", "--vary", "nodes=2,4"], "drop -p"),
    ],
)
def test_bad_node_counts_are_one_line(cli, args, match):
    code, _, err = cli("whatif", "-c", "allreduce", "-a", "ring", *args)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
