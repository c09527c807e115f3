"""Every notebook in notebooks/ executes top to bottom (their cells assert what they claim)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="install the [notebooks] extra")
    nbclient = pytest.importorskip("nbclient", reason="install the [notebooks] extra")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # as a student opens it: the notebook sets it
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")  # the kernel's own start-up chatter
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(path.parent.parent), os.environ.get("PYTHONPATH", "")])
    )
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
