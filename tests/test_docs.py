"""The README stays true: its algorithm table lists the registry, its examples run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import commsim
from commsim import cli
from commsim.algorithms import REGISTRY

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_table_lists_every_registered_algorithm():
    rows = set(re.findall(r"^\| (\w+) \| `(\w+)` \|", README, flags=re.MULTILINE))
    assert rows == set(REGISTRY)


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
    # keep it fast: smaller sweeps, fewer timed runs
    args = [a.replace("1..64:+1", "1..9:+1").replace("1GiB", "1MiB").replace("64MiB", "256KiB")
            for a in args]  # fmt: skip
    if args[0] in ("run", "validate"):
        args += ["--iters", "2", "--warmup", "1"]
        if args[0] == "validate":
            args += ["--sizes", "64KiB"]
    assert cli.main(args) == 0, capsys.readouterr().err
