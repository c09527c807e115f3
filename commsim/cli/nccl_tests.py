"""Placeholder until the nccl-tests reader lands (issue #9, part 3)."""

from __future__ import annotations

import argparse
from typing import Any

from commsim.cli.errors import UsageError


def add_arguments(group: Any) -> None:
    group.add_argument(
        "--from-nccl-tests", metavar="LOG", help="an nccl-tests log (all_reduce_perf output)"
    )


def calibrate_main(args: argparse.Namespace) -> int:
    raise UsageError("--from-nccl-tests is not available yet")


def validate_main(args: argparse.Namespace) -> int:
    raise UsageError("--from-nccl-tests is not available yet")
