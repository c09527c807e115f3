"""The README stays true: its algorithm table lists the registry, its examples run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import cli
from commsim.algorithms import REGISTRY
from commsim.profiles import Curve, FitQuality, PiecewiseLinear, Profile, save_profile

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_table_lists_every_registered_algorithm():
    rows = set(re.findall(r"^\| (\w+) \| `(\w+)` \|", README, flags=re.MULTILINE))
    assert rows == set(REGISTRY)


def test_readme_table_names_every_parameter_of_its_row():
    """Each row's parameters cell names every parameter the registry row takes (a parameter
    added to a factory must reach the table)."""
    cells = {
        (c, a): params
        for c, a, params in re.findall(
            r"^\| (\w+) \| `(\w+)` \| ([^|]*) \|", README, flags=re.MULTILINE
        )
    }
    missing = {
        key: [name for name in row.params if not re.search(rf"\b{name}\b", cells[key])]
        for key, row in REGISTRY.items()
    }
    assert {k: v for k, v in missing.items() if v} == {}


def test_readme_python_example_runs():
    code = re.search(r"```python\n(.*?)```", README, flags=re.DOTALL).group(1)
    exec(compile(code, "README", "exec"), {})


CLI_LINES = [
    line.split("#")[0].strip()
    for line in re.search(r"## Command line\n\n```bash\n(.*?)```", README, re.DOTALL)
    .group(1)
    .splitlines()
    if line.startswith("commsim ")
]


@pytest.mark.parametrize("line", CLI_LINES)
def test_readme_cli_examples_run(line, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    commsim.save(commsim.build("allreduce", "ring", nranks=4), tmp_path / "my_schedule.json")
    commsim.save(commsim.build("allreduce", "ring", nranks=4), tmp_path / "ring4.xml")  # MSCCL-IR
    args = shlex.split(line)[1:]
    if "profile.toml" in args and args[0] != "calibrate":  # a measured profile, made by hand
        curve = Curve("exchange", PiecewiseLinear.hockney(alpha=3e-6, beta=1e-10),
                      FitQuality(1.0, 0.0, 0.0, 2), np.array([0.0, 1e6]),
                      np.array([3e-6, 1.03e-4]), np.zeros(2))  # fmt: skip
        profile = Profile("mpi", 2, "by hand", "test", "2026-11-23", {"exchange": curve})
        save_profile(profile, tmp_path / "profile.toml")
    # keep it fast: smaller sweeps, fewer timed runs
    args = [a.replace("1..64:+1", "1..9:+1").replace("1GiB", "1MiB").replace("64MiB", "256KiB")
            for a in args]  # fmt: skip
    if args[0] in ("run", "validate"):
        args += ["--iters", "2", "--warmup", "1"]
        if args[0] == "validate":
            args += ["--sizes", "64KiB"]
    assert cli.main(args) == 0, capsys.readouterr().err
