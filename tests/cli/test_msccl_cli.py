"""``commsim verify|predict|compare --file algo.xml``: MSCCL-IR files on the command line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "msccl"
RING = DATA / "allreduce_ring_p4_LL.xml"

# the malformed cases of the library test, reused: one table for both surfaces
_spec = importlib.util.spec_from_file_location(
    "msccl_cases", DATA.parent.parent / "test_msccl_import.py"
)
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
MALFORMED = _cases.MALFORMED


def test_verify_an_msccl_file(cli):
    rc, out, err = cli("verify", "--file", str(RING))
    assert rc == 0 and err == ""
    row = next(line.split() for line in out.splitlines() if "allreduce_ring" in line)
    assert row[:5] == ["allreduce", "allreduce_ring_1channelsperring", "4", "7", "32"]
    assert row[-1] == "OK"


def test_predict_an_msccl_file_as_json(cli_json):
    doc = cli_json("predict", "--file", str(RING), "-s", "1MiB")
    assert doc["algorithm"] == "allreduce_ring_1channelsperring" and doc["nranks"] == 4
    assert doc["params"]["format"] == "msccl-ir" and doc["params"]["proto"] == "LL"
    (row,) = doc["results"]
    assert row["time_s"] >= row["lower_bound_s"] > 0


def test_compare_lists_the_msccl_file_beside_the_registry(cli):
    rc, out, err = cli("compare", "-c", "allreduce", "-p", "4", "-f", str(RING), "-s", "1MiB")
    assert rc == 0, err
    assert "allreduce_ring_1channelsperring" in out


def test_a_broken_program_fails_verification_naming_the_step(cli, tmp_path):
    text = (DATA / "allgather_ring_p8_LL128.xml").read_text()
    first = '<step s="0" type="s" srcbuf="o" srcoff="0"'
    assert first in text
    bad = tmp_path / "early_send.xml"
    bad.write_text(text.replace(first, first.replace('srcoff="0"', 'srcoff="3"'), 1))
    rc, _, err = cli("verify", "--file", str(bad))
    assert rc == 1 and "Traceback" not in err
    assert "gpu 0 tb 0 step 0 (s)" in err


@pytest.mark.parametrize(("case", "text", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
@pytest.mark.parametrize("command", ["verify", "predict"])
def test_a_malformed_file_exits_2_with_one_line(cli, tmp_path, command, case, text, message):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    rc, out, err = cli(command, "--file", str(path))
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(path) in err


def test_a_100_mb_file_exits_2_quickly(cli, tmp_path):
    path = tmp_path / "huge.xml"
    with path.open("wb") as f:
        f.truncate(100 * 2**20)
    rc, _, err = cli("verify", "--file", str(path))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "too large" in err and "16MiB" in err
