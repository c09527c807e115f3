"""`packed_trees` on the command line: trees packed from the cluster's links; a packing that
cannot be made, or bad trees, is one line and exit 2."""

from __future__ import annotations

import pytest


def test_the_cli_packs_trees_from_the_cluster(cli_json):
    doc = cli_json("compare", "-c", "allgather", "--cluster", "dgx1-v100:0-3:nvlink", "-s",
                   "1GiB", "-a", "packed_trees,packed_rings,ring")  # fmt: skip
    assert any("16 trees packed (each root at 100.0 % of the cut bound)" in n
               for n in doc["notes"])  # fmt: skip
    times = doc["results"][0]["time_s"]
    assert times["packed_trees"][0] <= times["packed_rings"][0] * (1 + 1e-9) < times["ring"][0]


def test_a_subset_without_a_ring_gets_trees(cli_json):
    doc = cli_json("compare", "-c", "allgather", "--cluster", "dgx1-v100:0,1,2,4:nvlink", "-s",
                   "1GiB", "-a", "packed_trees,packed_rings", "--contention", "flow")  # fmt: skip
    assert any("packed_rings keep rings=auto: the hosts have no ring" in n for n in doc["notes"])
    times = doc["results"][0]["time_s"]
    assert times["packed_trees"][0] < times["packed_rings"][0]


def test_a_rooted_collective_packs_from_its_root(cli_json):
    doc = cli_json("predict", "-c", "broadcast", "-a", "packed_trees", "--cluster",
                   "dgx1-v100:all:nvlink", "--root", "3", "-s", "1GiB")  # fmt: skip
    assert any("trees packed" in n for n in doc["notes"])


def test_a_switched_network_packs_nothing(cli_json):
    doc = cli_json("predict", "-c", "allgather", "-a", "packed_trees", "--cluster", "dgx-h100:2",
                   "-s", "1MiB")  # fmt: skip
    assert not any("trees" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (("--topology", "torus:129"), "at most 128 hosts"),
        (("--cluster", "dgx-h100:2"), "share no direct link"),
        (("-p", "4"), "--cluster or --topology"),
    ],
)
def test_trees_pack_that_cannot_be_made_is_one_line(cli, argv, match):
    code, _, err = cli("predict", "-c", "allgather", "-a", "packed_trees", *argv, "--param",
                       "trees=pack")  # fmt: skip
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("trees", "match"),
    [("r.0.0", "a parent for each"), ("r.2.1.0", "cycle"), ("a-b", "trees like")],
)
def test_bad_trees_are_one_line(cli, trees, match):
    code, _, err = cli("predict", "-c", "allgather", "-a", "packed_trees", "-p", "4", "--param",
                       f"trees={trees}")  # fmt: skip
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
