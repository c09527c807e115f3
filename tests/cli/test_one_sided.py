"""``--one-sided``: LogGP's one-sided messages from the command line (one line, exit 2 without
``--model loggp``)."""

from __future__ import annotations

import json

import pytest


def test_cli_one_sided_flag(cli):
    base = ["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "1MiB", "--json",
            "--model", "loggp", "--loggp", "L=1.5us,o=0.3us,g=0.2us,G=1GB/s"]  # fmt: skip
    rc, out, err = cli(*base)
    assert rc == 0, err
    rc, out1, err = cli(*base, "--one-sided")
    assert rc == 0, err
    t2 = json.loads(out)["results"][0]["time_s"]
    t1 = json.loads(out1)["results"][0]["time_s"]
    assert t2 - t1 == pytest.approx(2 * 3 * 0.3e-6, rel=1e-4)
    rc, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-p", "4", "--one-sided")
    assert rc == 2 and err.strip().splitlines()[-1].endswith(
        "--one-sided is LogGP's option: add --model loggp"
    )
