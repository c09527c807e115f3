"""The published nccl-tests logs of ``examples/nccl-tests/published/`` (docs/validation.md,
"Published nccl-tests results"): each one parses, holds exactly the rows its source published (a
row checked against the source's numbers), and ``commsim validate`` runs on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import commsim.cli
from commsim.interop import read_nccl_tests

PUBLISHED = Path(__file__).resolve().parents[1] / "examples" / "nccl-tests" / "published"

#: file: (preset, ranks, hosts, rows, (size, out-of-place time in us, out-of-place busbw)), the row
#: as the source printed it
LOGS = {
    "nccl-tests-290-h100-1node-all_reduce.log": ("dgx-h100:1", 8, 1, 6, (4294967296, 15870, 473.60)),
    "nccl-tests-290-h100-2node-ring-all_reduce.log": (
        "dgx-h100:2", 16, 2, 11, (8589934592, 179148, 89.90)
    ),
    "gcp-a3mega-h100-2node-all_reduce.log": ("dgx-h100:2", 16, 2, 31, (1073741824, 6759.0, 297.86)),
    "oci-h200-2node-all_reduce.log": ("dgx-h200:2", 16, 2, 5, (17179869184, 66214, 486.49)),
    "oci-h100-2node-all_reduce.log": ("dgx-h100:2", 16, 2, 5, (2147483648, 8825.9, 456.22)),
    "oci-a100-1node-all_reduce.log": ("dgx-a100:1", 8, 1, 28, (67108864, 589.5, 199.23)),
    "oci-a100-2node-all_reduce.log": ("dgx-a100:2", 16, 2, 28, (8589934592, 225083, 71.56)),
    "coreweave-gb200-nvl72-all_reduce.log": ("gb200-nvl72:1", 72, 0, 5, (4294967296, 10094, 839.16)),
    # condensed tables (no host names, no in-place columns): the rank count from busbw/algbw
    "gcp-a4-b200-1node-all_reduce.log": ("dgx-b200:1", 8, 0, 12, (1073741824, 2576.7, 729.25)),
    "gcp-a4-b200-2node-all_reduce.log": ("dgx-b200:2", 16, 0, 12, (1073741824, 3328.7, 604.82)),
}  # fmt: skip
#: logs that do not name their binary (their headers say how the collective is known)
COLLECTIVE = {
    "coreweave-gb200-nvl72-all_reduce.log": "allreduce",
    "gcp-a4-b200-1node-all_reduce.log": "allreduce",
    "gcp-a4-b200-2node-all_reduce.log": "allreduce",
}


def test_every_published_log_is_listed():
    assert sorted(p.name for p in PUBLISHED.glob("*.log")) == sorted(LOGS)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_published_log_parses_with_its_source_rows(name):
    _, nranks, nhosts, nrows, (size, time_us, busbw) = LOGS[name]
    log = read_nccl_tests(PUBLISHED / name, collective=COLLECTIVE.get(name))
    assert log.collective == "allreduce" and log.nranks == nranks
    assert len(set(log.hosts)) == nhosts and len(log.rows) == nrows
    (row,) = [r for r in log.rows if r.size == size]
    assert row.time_oop_s == pytest.approx(time_us * 1e-6) and row.busbw_oop == busbw
    # the header says where the numbers come from
    head = (PUBLISHED / name).read_text().splitlines()[:6]
    assert head[0].startswith("# PUBLISHED nccl-tests output") and "Source:" in "\n".join(head)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_validate_runs_on_a_published_log(name, capsys):
    preset = LOGS[name][0]
    argv = ["validate", "--from-nccl-tests", str(PUBLISHED / name), "--cluster", preset, "--json"]
    argv += ["--collective", COLLECTIVE[name]] if name in COLLECTIVE else []
    assert commsim.cli.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rows"]) == LOGS[name][3] and doc["algorithm"] == "snake_ring"
