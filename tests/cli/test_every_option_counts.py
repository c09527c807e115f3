"""Every model option either changes the prediction or is refused with one line (issue #26):
never silently ignored, on every model path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

TOML = str(Path(__file__).parents[2] / "examples" / "clusters" / "dgx-h100-like.toml")

PATHS = {
    "hockney": ["-p", "8"],
    "loggp": ["-p", "8", "--model", "loggp"],
    "topology": ["--topology", "switch:8"],
    "flow": ["--topology", "torus:2x4", "--contention", "flow"],
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
    "slow-rank": ["--slow-rank", "1=2x"],
    "skew": ["--skew", "1=1ms"],
    "slow-link": ["--slow-link", "1=0.5"],
    "profile": ["--profile", "PROFILE"],
    "one-sided": ["--one-sided"],
    "wire": ["--wire", "fp16"],
    "port-rule": ["--port-rule", "link"],
    "flow-rule": ["--flow-rule", "cm02"],
}


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> str:
    """A measured-transport file as `commsim calibrate` writes it: 5 us + 1 ns/B, no reduction."""
    from commsim.profiles import Curve, FitQuality, PiecewiseLinear, Profile, save_profile

    sizes = np.array([8.0, 1024.0, 2.0**20])
    fit = PiecewiseLinear.hockney(alpha=5e-6, beta=1e-9)
    curve = Curve("pingpong", fit, FitQuality(1.0, 0.0, 0.0, 3), sizes, fit(sizes), 0 * sizes)
    prof = Profile("mpi", 2, "hand-made", "test", "2026-11-26", {"pingpong": curve})
    return str(save_profile(prof, tmp_path_factory.mktemp("profile") / "p.toml"))


def _times(out: str) -> tuple:
    """Every time and bound in a `predict` or `compare` JSON document."""
    doc = json.loads(out)["results"]
    return tuple(
        json.dumps(r.get(k), sort_keys=True) for r in doc for k in ("time_s", "lower_bound_s")
    )


_BEFORE: dict[tuple[str, str], str] = {}  # (command, path) -> its output without the option


@pytest.mark.parametrize("command", ["predict", "compare"])
@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("path", PATHS)
def test_an_option_changes_the_prediction_or_is_refused(cli, profile, command, path, option):
    algorithm = ["-a", "direct"] if command == "predict" else ["-a", "direct,ring"]
    base = [command, "-c", "allreduce", *algorithm, "-s", "1MiB", "--json", *PATHS[path]]
    if (command, path) not in _BEFORE:  # each path's plain prediction once per process
        code, _BEFORE[command, path], _ = cli(*base)
        assert code == 0
    before = _BEFORE[command, path]
    flags = [profile if f == "PROFILE" else f for f in OPTIONS[option]]
    code, after, err = cli(*base, *flags)
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and "error" in err
        return
    assert code == 0, err
    # --links on a one-channel schedule moves the bound only (one channel uses one link)
    assert _times(after) != _times(before), (
        f"{option} on the {path} path of {command} was accepted and changed nothing"
    )
