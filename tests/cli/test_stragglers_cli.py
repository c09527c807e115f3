"""Straggler flags (issue #26): ``--slow-rank`` and ``--skew`` give the numbers the API gives, and
models that cannot express them refuse in one line."""

from __future__ import annotations

import pytest

import commsim
from commsim.clusters import cluster
from commsim.tuner import cluster_model

RING = ["predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:2", "-s", "1GiB"]


def _api(**stragglers) -> float:
    s = commsim.build("allreduce", "ring", nranks=16)
    return cluster_model(cluster("dgx-h100:2"), **stragglers).predict(s, "1GiB").time


@pytest.mark.parametrize(
    ("flags", "api"),
    [
        (["--slow-rank", "7=2x"], {"slow_ranks": {7: 2.0}}),
        (["--slow-rank", "0=1.5,7=2"], {"slow_ranks": {0: 1.5, 7: 2.0}}),
        (["--skew", "7=50us"], {"start_skew": {7: 50e-6}}),
        (["--skew", "random:50us,seed=1"], {"start_skew": "random:50us,seed=1"}),
    ],
)
def test_flags_give_the_apis_numbers(cli_json, flags, api):
    plain = cli_json(*RING, "--json")["results"][0]["time_s"]
    doc = cli_json(*RING, *flags, "--json")
    t = doc["results"][0]["time_s"]
    assert t == pytest.approx(_api(**api), rel=1e-12)
    assert t > plain  # rank 7 sends over the rail: a straggler there costs time


def _rail_of(host: int) -> dict:
    graph = cluster("dgx-h100:2").graph
    return {(u, v): 0.5 for u, v, k in graph.edges(host, data="kind") if k == "rail"}


@pytest.mark.parametrize(
    ("flags", "api"),
    [
        (["--slow-link", "7:rail=0.5"], {"link_factor": _rail_of(7)}),
        (
            ["--slow-link", "7:rail=0.5x,9:rail=0.5"],
            {"link_factor": {**_rail_of(7), **_rail_of(9)}},
        ),
    ],
)
def test_slow_links_give_the_apis_numbers(cli_json, flags, api):
    plain = cli_json(*RING, "--json")["results"][0]["time_s"]
    t = cli_json(*RING, *flags, "--json")["results"][0]["time_s"]
    assert t == pytest.approx(_api(**api), rel=1e-12)
    assert (
        t > plain * 1.5
    )  # the ring waits for its slowest rail: half its bandwidth, ~twice the time


def test_a_random_skew_is_reproducible_and_seeded():
    assert _api(start_skew="random:50us,seed=1") == _api(start_skew="random:50us,seed=1")
    assert _api(start_skew="random:50us,seed=1") != _api(start_skew="random:50us,seed=2")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["-p", "8", "--slow-rank", "3=2x"], "needs the topology model"),
        (["-p", "8", "--model", "loggp", "--skew", "1=1us"], "needs the topology model"),
        (["--cluster", "dgx-h100:2", "--slow-rank", "3=0.5"], "factor >= 1"),
        (["--cluster", "dgx-h100:2", "--skew", "soon"], "RANK=TIME"),
        (["-p", "8", "--slow-link", "1=0.5"], "needs the topology model"),
        (["--cluster", "dgx-h100:2", "--slow-link", "7=1.5"], "factor in [0, 1]"),
        (["--cluster", "dgx-h100:2", "--slow-link", "99=0.5"], "no host 99"),
        (["--cluster", "dgx-h100:2", "--slow-link", "7:spine=0.5"], "(it has: nvlink, rail)"),
        (["--cluster", "dgx-h100:2", "--skew", "random:fast"], "cannot parse time 'fast'"),
    ],
)
def test_what_cannot_be_expressed_is_one_line(cli, args, match):
    code, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-s", "1MiB", *args)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
