"""Every model option either changes the prediction or is refused with one line (issue #26):
never silently ignored, on every model path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TOML = str(Path(__file__).parents[2] / "examples" / "clusters" / "dgx-h100-like.toml")

PATHS = {
    "hockney": ["-p", "8"],
    "loggp": ["-p", "8", "--model", "loggp"],
    "topology": ["--topology", "switch:8"],
    "cluster": ["--cluster", "dgx-h100:2"],
    "cluster-hockney": ["--cluster", "dgx-h100:2", "--model", "hockney"],
    "toml": ["--cluster", TOML],
}
OPTIONS = {
    "alpha": ["--alpha", "1ms"],
    "beta": ["--beta", "1Gb/s"],
    "gamma": ["--gamma", "1GB/s"],
    "ports": ["--ports", "2"],
    "links": ["--links", "2"],
    "loggp": ["--loggp", "L=1ms"],
    "wire": ["--wire", "fp16"],
}


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("path", PATHS)
def test_an_option_changes_the_prediction_or_is_refused(cli, path, option):
    base = ["predict", "-c", "allreduce", "-a", "direct", "-s", "1MiB", "--json", *PATHS[path]]
    code, before, _ = cli(*base)
    assert code == 0
    code, after, err = cli(*base, *OPTIONS[option])
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and "error" in err
        return
    assert code == 0

    r0, r1 = json.loads(before)["results"][0], json.loads(after)["results"][0]
    changed = r1["time_s"] != r0["time_s"] or r1["lower_bound_s"] != r0["lower_bound_s"]
    # --links on a one-channel schedule moves the bound only (one channel uses one link)
    assert changed, f"{option} on the {path} path was accepted and changed nothing"
