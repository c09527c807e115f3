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
