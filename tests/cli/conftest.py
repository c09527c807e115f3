"""Helpers for the command-line tests: run ``commsim.cli.main`` in-process, capture its output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import commsim
from commsim.cli import main

ALPHA, BETA, GAMMA = 2e-6, 1 / 25e9, 1 / 100e9  # the documented defaults


@pytest.fixture
def cli(capsys) -> Callable[..., tuple[int, str, str]]:
    """``cli("predict", "-c", ...)`` -> ``(exit status, stdout, stderr)``."""

    def run(*argv: str) -> tuple[int, str, str]:
        rc = main(list(argv))
        out, err = capsys.readouterr()
        return rc, out, err

    return run


@pytest.fixture
def cli_json(cli) -> Callable[..., Any]:
    """``cli_json("predict", ...)``: the ``--json`` document; ``rc=`` the expected exit status."""

    def run(*argv: str, rc: int = 0) -> Any:
        got, out, err = cli(*argv, "--json")
        assert got == rc, err
        return json.loads(out)

    return run


@pytest.fixture
def ring_time() -> Callable[..., float]:
    """The ring allreduce's closed form under the default model (or the given parameters)."""

    def time(p: int, n: float, alpha=ALPHA, beta=BETA, gamma=GAMMA) -> float:
        return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma

    return time


@pytest.fixture
def some() -> Callable[..., list[str]]:
    """``some(collective, *names)``: the given algorithms that are registered (others land
    concurrently)."""

    def registered(collective: str, *names: str) -> list[str]:
        have = commsim.available(collective)
        return [n for n in names if n in have]

    return registered


@pytest.fixture
def schedule_files(tmp_path) -> dict[str, str]:
    """A saved ring allreduce on 4 ranks, and broken variants of it."""
    good = tmp_path / "ring4.json"
    commsim.save(commsim.build("allreduce", "ring", 4), good)
    data = json.loads(good.read_text())

    def variant(name, edit):
        d = json.loads(json.dumps(data))
        edit(d)
        path = tmp_path / name
        path.write_text(json.dumps(d))
        return str(path)

    def unreduce(d):
        d["steps"][2]["reduce"][1] = False

    def out_of_range(d):
        d["steps"][1]["dst"][2] = 7

    return {
        "good": str(good),
        "wrong": variant("wrong.json", unreduce),
        "out_of_range": variant("oor.json", out_of_range),
        "no_nranks": variant("nof.json", lambda d: d.pop("nranks")),
    }
