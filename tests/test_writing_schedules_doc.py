"""docs/writing-schedules.md runs: its Python blocks in order, its printed output as shown, its
command lines with the exit status they say."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from commsim import cli

PAGE = Path(__file__).parent.parent / "docs" / "writing-schedules.md"
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(), flags=re.DOTALL | re.MULTILINE)


def _cli_lines(code: str) -> list[tuple[list[str], int]]:
    """``(arguments, expected exit status)`` of every ``commsim`` line of a bash block."""
    out = []
    for line in code.splitlines():
        if line.startswith("commsim "):
            command, _, comment = line.partition("#")
            status = 1 if "exits 1" in comment else 0
            out.append((shlex.split(command)[1:], status))
    return out


def test_the_page_has_code_output_and_commands():
    kinds = [kind for kind, _ in BLOCKS]
    assert kinds.count("python") >= 10 and kinds.count("text") >= 8 and "bash" in kinds


def test_every_block_runs_and_prints_what_the_page_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the page saves grid16.json and broken.json
    namespace: dict = {"__name__": "writing_schedules"}
    printed: str | None = None
    said: dict[str, str] = {}
    for i, (kind, code) in enumerate(BLOCKS):
        where = f"{PAGE.name}, block {i + 1} ({kind})"
        if kind == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, where, "exec"), namespace)
            printed = out.getvalue()
        elif kind == "text":
            assert printed is not None, f"{where}: output shown under no code block"
            got = [line.rstrip() for line in printed.rstrip("\n").splitlines()]
            assert got == code.rstrip("\n").splitlines(), where
            printed = None
        elif kind == "bash":
            for args, status in _cli_lines(code):
                if args[0] == "run":  # keep it fast: fewer timed runs
                    args += ["--iters", "2", "--warmup", "1"]
                capsys.readouterr()
                rc = cli.main(args)
                out = capsys.readouterr()
                assert rc == status, f"{where}: commsim {' '.join(args)}: {out}"
                said[" ".join(args)] = out.out + out.err
    assert len(said) >= 7
    # the broken schedule fails on the command line too, naming where it first went wrong
    assert "it first went wrong at step 0: rank 1's" in said["verify --file broken.json"]
