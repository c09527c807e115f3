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


def test_cli_compare_notes_name_only_the_rows_it_ran(cli):
    """A row skipped at every p gets its skip note only, not the network's parameter note."""
    rc, out, _ = cli("compare", "-c", "allreduce", "-a", "ring,hierarchical,nvls",
                     "--cluster", "dgx-h100:2", "-s", "1MiB")  # fmt: skip
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert rc == 0 and any(n.startswith("note: skipped nvls:") for n in notes), out
    assert "note: ranks_per_node=8 (from the network) for hierarchical" in notes, out
    rc, out, _ = cli("compare", "-c", "allreduce", "-a", "ring,nvls", "--cluster", "dgx-h100:2",
                     "-s", "1MiB")  # fmt: skip
    assert rc == 0 and "ranks_per_node" not in out.replace("one server's ranks_per_node", "")


def test_cli_algorithms_lists_nvls_with_its_formula_and_source(cli):
    rc, out, _ = cli("algorithms", "-c", "allreduce", "-a", "nvls")
    assert rc == 0 and "(S+1)w·α" in out and "NVLink SHARP" in out


def test_cli_nvls_tree_on_two_dgx_h100_beats_the_snake_ring(cli_json):
    doc = cli_json("compare", "-c", "allreduce", "-a", "snake_ring,nvls,nvls_tree", "--cluster",
                   "dgx-h100:2", "-s", "1GiB")  # fmt: skip
    (panel,) = doc["results"]
    assert panel["winner"] == ["nvls_tree"] and "nvls" in panel["skipped"]


def test_cli_nvls_tree_on_a_short_last_server(cli_json):
    """9, 12 and 14 GPUs on two DGX H100: 8 on the first server, the rest on the second, each
    server's helpers on its own NVSwitch; placed in equal blocks, some of the first server's
    helpers sat on the second switch and the run failed with "no route"."""
    for p in ("9", "12", "14"):
        doc = cli_json("predict", "-c", "allreduce", "-a", "nvls_tree", "-p", p,
                       "--cluster", "dgx-h100:2", "-s", "1GiB")  # fmt: skip
        assert doc["results"][0]["time_s"] >= doc["results"][0]["lower_bound_s"] > 0


def test_cli_nvls_tree_whose_servers_are_not_the_networks_is_refused_in_one_line(cli):
    for extra in (("--placement", "round_robin"), ("--param", "ranks_per_node=16")):
        rc, out, err = cli("predict", "-c", "allreduce", "-a", "nvls_tree", "-p", "16",
                           "--cluster", "dgx-h100:2", "-s", "1GiB", *extra)  # fmt: skip
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert "do not match the network's" in err


def test_cli_breakdown_leaves_out_rounding_noise(cli):
    """With the flow simulation, a reduction hidden by its transfer left 1.7e-18 s in the
    breakdown ("reduction 1.73e-06ps"): parts under a billionth of the whole are not shown."""
    rc, out, _ = cli("predict", "-c", "allreduce", "-a", "nvls", "--cluster", "dgx-h100:1",
                     "-s", "1GiB", "--contention", "flow")  # fmt: skip
    (line,) = [x for x in out.splitlines() if x.startswith("time at 1GiB:")]
    assert rc == 0 and "ps" not in line and "nvlink" in line


def test_cli_nvls_without_a_network_says_how_its_switch_is_charged(cli):
    rc, out, _ = cli("predict", "-c", "allreduce", "-a", "nvls", "-p", "8", "-s", "1GiB")
    assert rc == 0 and "helper ranks are a reducing switch, but this model has no network" in out
    assert "a cluster whose NVSwitch reduces (nvls)" in out
    rc, out, _ = cli("predict", "-c", "allreduce", "-a", "collnet_direct", "-p", "16",
                     "-s", "1GiB")  # fmt: skip
    assert rc == 0 and "a cluster whose InfiniBand leaves reduce (sharp = true)" in out
    rc, out, _ = cli("predict", "-c", "allreduce", "-a", "nvls", "--cluster", "dgx-h100:1",
                     "-s", "1GiB")  # fmt: skip
    assert rc == 0 and "has no network" not in out
