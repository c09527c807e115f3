"""`packed_rings` on the command line: rings packed from the cluster's links, bad rings refused."""

from __future__ import annotations

import pytest


def test_the_cli_packs_rings_from_the_cluster(cli_json):
    doc = cli_json("compare", "-c", "allgather", "--cluster", "dgx1-v100:all:nvlink", "-s",
                   "1GiB", "--json")  # fmt: skip
    assert any("6 rings packed" in n for n in doc["notes"])
    times = doc["results"][0]["time_s"]
    assert min(times, key=lambda a: times[a][0]) == "packed_rings"


@pytest.mark.parametrize(
    ("rings", "match"),
    [("0-1-2", "visits every rank"), ("0-1-1-2", "visits every rank"), ("a-b", "orders like")],
)
def test_bad_rings_are_one_line(cli, rings, match):
    code, _, err = cli("predict", "-c", "allgather", "-a", "packed_rings", "-p", "4",
                       "--param", f"rings={rings}")  # fmt: skip
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
