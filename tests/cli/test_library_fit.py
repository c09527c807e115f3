"""NCCL's cost model fitted to nccl-tests logs (issue #19 item 11): launch, bus bandwidth and
protocol efficiencies from the rows up to 16 MiB, what a log cannot identify said in words."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim.bench.calibrate import ProtocolLine, fit_library, library_times
from commsim.errors import CommsimError
from commsim.interop import NcclTestsLog, read_nccl_tests
from commsim.models import PROTOCOLS

PUBLISHED = Path(__file__).parents[2] / "examples" / "nccl-tests" / "published"
SIZES = [2**k for k in range(6, 34)]  # 64 B .. 8 GiB, as nccl-tests -b 64 -e 8G -f 2
RING8 = commsim.build("allreduce", "ring", nranks=8)  # NCCL's ring: 14 steps


def _synthetic(launch: float, bus: float = 200e9) -> NcclTestsLog:
    """A log the model itself generates: 8 ranks' allreduce (14 steps, F = 1.75), LL at 30% of
    the bus bandwidth, LL128 at 80%, Simple at all of it, NCCL's LL step latency."""
    f, c_ll = 1.75, launch + 14 * PROTOCOLS["LL"].hop_intra
    lines = (
        ProtocolLine("LL", c_ll, f / (0.3 * bus), 0.3, 0.0, 0),
        ProtocolLine("LL128", c_ll + 20e-6, f / (0.8 * bus), 0.8, 0.0, 0),
        ProtocolLine("Simple", c_ll + 30e-6, f / bus, 1.0, 0.0, 0),
    )
    t = library_times(lines, np.array(SIZES, dtype=float))
    wobble = 1 + 0.002 * np.cos(np.arange(len(t)))  # the in-place run, 0.2% apart
    return NcclTestsLog.from_times("allreduce", 8, SIZES, t, t * wobble)


@pytest.mark.parametrize("launch", [5e-6, 20e-6])
def test_a_known_launch_and_bandwidth_are_recovered_from_a_synthetic_log(launch):
    fit = fit_library(_synthetic(launch), RING8)
    assert fit.launch == pytest.approx(launch, rel=0.02)
    assert fit.bus_bandwidth == pytest.approx(200e9, rel=0.02)
    assert [p.name for p in fit.protocols] == ["LL", "LL128", "Simple"]
    assert fit.protocols[1].efficiency == pytest.approx(0.8, rel=0.02)
    assert fit.median_error() < 0.01  # the rows of 64 MiB and up, never fitted
    assert any("channel cap: not identifiable" in n for n in fit.notes)


def test_the_published_one_node_a100_log_extrapolates_within_15_percent():
    log = read_nccl_tests(PUBLISHED / "oci-a100-1node-all_reduce.log")
    fit = fit_library(log, RING8)
    held = log.sizes >= 64 * 2**20
    assert held.sum() == 8 and not (fit.sizes[held] <= fit.fit_up_to).any()
    assert fit.median_error() <= 0.15
    assert fit.protocols[-1].name == "Simple" and fit.protocols[-1].rows >= 2


def test_a_schedule_of_another_collective_or_size_is_refused_in_one_line():
    log = NcclTestsLog.from_times("allgather", 8, [1024, 2048, 4096], [1e-5, 1.1e-5, 1.2e-5])
    with pytest.raises(CommsimError, match="the schedule is allreduce on 8 ranks but"):
        fit_library(log, RING8)


def test_calibrate_prints_the_library_parameters_and_json_carries_them(cli, cli_json):
    log = str(PUBLISHED / "oci-a100-1node-all_reduce.log")
    doc = cli_json("calibrate", "--from-nccl-tests", log, "--cluster", "dgx-a100:1")
    lib = doc["library"]
    assert lib["bus_bandwidth_Bps"] > 0 and lib["launch_s"] > 0
    assert lib["median_abs_error_held_out"] <= 0.15
    code, out, _ = cli("calibrate", "--from-nccl-tests", log, "--cluster", "dgx-a100:1")
    assert code == 0 and "library parameters (NCCL's cost model" in out
    assert "channel cap: not identifiable" in out


def test_a_plot_says_where_it_went_and_json_stays_one_document(cli, tmp_path):
    log = str(PUBLISHED / "oci-a100-1node-all_reduce.log")
    for mode in ("calibrate", "validate"):
        path = tmp_path / f"{mode}.png"
        args = (mode, "--from-nccl-tests", log, "--cluster", "dgx-a100:1", "--plot", str(path))
        code, out, _ = cli(*args)
        assert code == 0 and out.rstrip().endswith(f"plot written to {path}")
        assert path.stat().st_size > 1000
        code, out, _ = cli(*args, "--json")
        assert code == 0 and json.loads(out) and "plot written" not in out
