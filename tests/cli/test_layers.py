"""The CLI sits on top: nothing below it imports it or sees argparse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent.parent / "commsim"
BELOW_CLI = sorted(
    p
    for p in PACKAGE.rglob("*.py")
    if "cli" not in p.relative_to(PACKAGE).parts and p.name != "__main__.py"
)


@pytest.mark.parametrize("path", BELOW_CLI, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_cli_imports_it_or_argparse(path):
    text = path.read_text()
    assert not re.search(r"^\s*(from|import) commsim\.cli\b|from commsim import cli\b", text, re.M)
    assert not re.search(r"^\s*(import argparse|from argparse)", text, re.M)
