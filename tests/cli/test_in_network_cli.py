"""In-network rows on the command line: refused in one line where no switch reduces, shown in
``compare`` where one does, listed by ``algorithms`` with formula and source."""

from __future__ import annotations


def test_cli_refuses_nvls_without_nvswitch_in_one_line(cli):
    rc, out, err = cli(
        "predict", "-c", "allreduce", "-a", "nvls", "--cluster", "dgx-a100:1", "-s", "1GiB"
    )
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "in-network reduction needs a switch" in err


def test_cli_compare_shows_nvls_where_the_switch_reduces_and_skips_it_elsewhere(cli_json):
    doc = cli_json("compare", "-c", "allreduce", "-a", "ring,nvls", "--cluster", "dgx-h100:1",
                   "-s", "1GiB")  # fmt: skip
    (panel,) = doc["results"]
    assert panel["winner"] == ["nvls"]
    doc = cli_json("compare", "-c", "allreduce", "-a", "ring,nvls", "--cluster", "dgx-a100:1",
                   "-s", "1GiB")  # fmt: skip
    (panel,) = doc["results"]
    assert "nvls" in panel["skipped"] and panel["winner"] == ["ring"]


def test_cli_algorithms_lists_nvls_with_its_formula_and_source(cli):
    rc, out, _ = cli("algorithms", "-c", "allreduce", "-a", "nvls")
    assert rc == 0 and "(S+1)w·α" in out and "NVLink SHARP" in out


def test_cli_nvls_tree_on_two_dgx_h100_beats_the_snake_ring(cli_json):
    doc = cli_json("compare", "-c", "allreduce", "-a", "snake_ring,nvls,nvls_tree", "--cluster",
                   "dgx-h100:2", "-s", "1GiB")  # fmt: skip
    (panel,) = doc["results"]
    assert panel["winner"] == ["nvls_tree"] and "nvls" in panel["skipped"]
