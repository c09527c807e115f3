"""``examples/data_parallel_sgd.py`` on 8 JAX devices: training with a commsim allreduce follows
the same loss trajectory as training with ``lax.pmean`` and as single-process full-batch SGD.

(The same example under ``mpirun`` is tested in ``tests/mpi/test_mpi_sgd.py``.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import numpy as np
import pytest

EXAMPLE = Path(__file__).parents[1] / "examples" / "data_parallel_sgd.py"


@pytest.fixture(scope="module")
def sgd():
    spec = importlib.util.spec_from_file_location("data_parallel_sgd", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _needs_devices(n: int) -> None:
    if len(jax.devices()) < n:
        pytest.skip(f"needs {n} JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count)")


@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner", "auto"])
def test_trajectory_equals_pmean_and_single_process(sgd, algorithm):
    _needs_devices(8)
    args = sgd.parse(
        ["--backend", "jax", "--steps", "50", "--epochs", "1", "--algorithm", algorithm]
        + (["--bucket-bytes", "16KiB"] if algorithm == "auto" else [])
    )
    ours = sgd.losses(sgd.train(args, sgd.jax_run(args, native=False), quiet=True))
    native = sgd.losses(sgd.train(args, sgd.jax_run(args, native=True), quiet=True))
    single = sgd.losses(sgd.train(args, sgd.single_run(args), quiet=True))
    assert len(ours) == 50
    assert ours[-1] < 0.5 * ours[0]  # it trains
    np.testing.assert_allclose(ours, native, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours, single, rtol=1e-4, atol=1e-5)


def test_a_wrong_gradient_average_shows(sgd):
    """The comparison can fail: summing instead of averaging changes the trajectory."""
    _needs_devices(8)
    args = sgd.parse(["--backend", "jax", "--steps", "10", "--epochs", "1"])
    single = sgd.losses(sgd.train(args, sgd.single_run(args), quiet=True))
    args.lr *= 8  # the sum of 8 workers' mean gradients is 8x the full-batch gradient
    too_big = sgd.losses(sgd.train(args, sgd.single_run(args), quiet=True))
    assert np.abs(too_big - single).max() > 1e-2


def test_buckets_match_the_drop_in(sgd):
    args = sgd.parse(["--backend", "single"])
    params = sgd.init_mlp(sgd.layers(args))
    sizes = [int(a.size) * 4 for a in jax.tree.leaves(params)]  # b0 b1 b2 w0 w1 w2, float32
    assert sgd.gradient_buckets(params, None) == [sum(sizes)]
    per = sgd.gradient_buckets(params, 64 * 1024)
    assert sum(per) == sum(sizes) and max(s for s in per if s > 64 * 1024) == 256 * 256 * 4
    assert all(s <= 64 * 1024 for s in per if s != 256 * 256 * 4)


def test_main_prints_epochs_check_and_cluster_prediction(sgd, capsys):
    _needs_devices(4)
    code = sgd.main(["--backend", "jax", "--devices", "4", "--steps", "6", "--epochs", "2",
                     "--check", "--cluster", "dgx-h100:2"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("epoch ") == 2 and "communication" in out
    assert "max |loss - native collective's|" in out
    assert "16 data-parallel workers" in out and "gradient allreduce per step" in out


@pytest.mark.parametrize("compression", ["fp16", "int8"])
def test_compressed_gradients_end_within_one_percent_of_fp32(sgd, compression, tmp_path):
    """fp16, and int8 with its error-feedback residual, train like exact float32 messages:
    the final loss is within 1 % of fp32's (issue #22)."""
    _needs_devices(8)
    args = sgd.parse(
        ["--backend", "jax", "--steps", "40", "--epochs", "1", "--compression", compression]
    )
    result = sgd.compare_compression(args, sgd.jax_run)
    assert len(result["compressed"]) == len(result["fp32"]) == 40
    assert result["compressed"][-1] < 0.5 * result["compressed"][0]  # it trains
    assert result["final_gap"] < 0.01
    assert not np.array_equal(result["compressed"], result["fp32"])  # the wire changed bits
    png = tmp_path / "loss.png"
    sgd.plot_compression(result, compression, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
