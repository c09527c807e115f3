"""An in-network row under a protocol on the command line (issue #19): NCCL runs NVLS with
Simple only, so ``predict`` refuses LL in one line (exit 2) and ``compare`` skips the row with
that line, keeping the others."""

from __future__ import annotations


def test_predict_refuses_nvls_under_ll(cli):
    rc, out, err = cli("predict", "-c", "allreduce", "-a", "nvls", "--cluster", "dgx-h100:1",
                       "-s", "1GiB", "--protocol", "LL")  # fmt: skip
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Simple only" in err


def test_compare_skips_nvls_under_ll_and_keeps_the_ring(cli_json):
    doc = cli_json("compare", "-c", "allreduce", "-a", "nvls,ring", "--cluster", "dgx-h100:1",
                   "-s", "1GiB", "--protocol", "LL")  # fmt: skip
    (result,) = doc["results"]
    assert list(result["time_s"]) == ["ring"]
    assert "Simple only" in result["skipped"]["nvls"]


def test_validate_takes_the_port_rule(cli_json):
    from pathlib import Path

    log = str(Path(__file__).resolve().parents[2] / "examples" / "nccl-tests" / "published"
              / "oci-h100-2node-all_reduce.log")  # fmt: skip
    base = ("validate", "--from-nccl-tests", log, "--cluster", "dgx-h100:2", "-a", "nvls_tree",
            "--param", "pipeline=16")  # fmt: skip
    channel = cli_json(*base)
    link = cli_json(*base, "--port-rule", "link")
    assert channel["port_rule"] == "channel" and link["port_rule"] == "link"
    t = [[r["predicted_s"] for r in d["rows"]] for d in (channel, link)]
    assert all(b < a for a, b in zip(*t, strict=True))  # NVLink beside the NIC: faster


def test_predict_under_protocol_auto_places_the_switch_rows(cli):
    """``--protocol auto`` on a cluster places an in-network row's helpers on the switch, as
    ``--protocol Simple`` does: no 'no network' note, the same time."""
    base = ("predict", "-c", "allreduce", "-a", "nvls", "--cluster", "dgx-h100:1", "-s", "1GiB")
    rc, auto, err = cli(*base, "--protocol", "auto")
    assert rc == 0, err
    assert "no network" not in auto
    rc, simple, _ = cli(*base, "--protocol", "Simple")
    row = [line.split()[1] for line in (auto, simple) for line in line.splitlines()
           if line.startswith("1GiB")]  # fmt: skip
    assert row[0] == row[1]


def test_tune_tunes_a_named_switch_row_on_a_cluster_that_reduces(cli_json):
    doc = cli_json("tune", "-c", "allreduce", "--cluster", "dgx-h100:1", "-a", "ring,nvls",
                   "-s", "1GiB")  # fmt: skip
    assert [r["algorithm"] for r in doc["ranges"]] == ["nvls"]


def test_topology_shows_the_collective_library(cli, cli_json):
    rc, out, _ = cli("topology", "dgx-h100:1")
    assert rc == 0 and "nvlink driven at 82.4% of its rate" in out
    assert cli_json("topology", "dgx-h100:1")["library"]["nvls_efficiency"] == 0.85
    assert "library" not in cli_json("topology", "torus:4x4")
