"""Calibration: measure a transport, fit model parameters to it, write a profile.

* :func:`calibrate`: run a backend's microbenchmarks (MPI through mpi4py under ``mpirun``, JAX
  devices, CUDA devices) and fit them: a :class:`commsim.profiles.Profile`.
* :class:`Samples`: what one microbenchmark measured (raw times per size and repeat).
* :func:`fit_curve`, :func:`fit_pieces`: the robust piecewise-linear fits (breakpoints from the
  data), with their quality.
* :func:`profile_from_samples`: samples to a profile (γ, LogGP, the per-call overhead).
* :func:`fit_cluster`: a cluster's link latency and efficiency fitted to an nccl-tests log
  (:class:`commsim.interop.NcclTestsLog`), a :class:`ClusterFit`; :func:`predict_rows`, the
  cluster's prediction of every row and :func:`log_model` its model (a protocol chosen);
  :func:`cluster_description`, a preset or file as the fit reads it.

The nccl-tests log format itself (``parse_nccl_tests``, ``NcclTestsLog``, ...) lives in
:mod:`commsim.interop`. :data:`SUITES` holds the transport microbenchmarks, by the kind of
transport a backend's row names (:func:`suite_of`).

Examples:
    >>> import numpy as np
    >>> n = 2.0 ** np.arange(3, 20)
    >>> s = Samples("pingpong", n, np.outer(1e-6 + n / 5e9, np.ones(5)), "mpi", 2)
    >>> c = fit_curve(s)
    >>> round(c.fit.pieces[0].alpha * 1e6, 3), round(1 / c.fit.pieces[0].beta / 1e9, 3)
    (1.0, 5.0)
"""

from typing import TYPE_CHECKING

from commsim._lazy import lazy_exports

if TYPE_CHECKING:
    from commsim.bench.calibrate._calibrate import (
        DEFAULT_SIZES,
        SUITES,
        Suite,
        calibrate,
        cuda_device_samples,
        jax_device_samples,
        machine,
        mpi_samples,
        profile_from_samples,
        suite_of,
    )
    from commsim.bench.calibrate._cluster_fit import (
        DEFAULT_FIT_UP_TO,
        HELD_OUT_FROM,
        ClusterFit,
        LinkFit,
        cluster_description,
        fit_cluster,
        log_model,
        predict_rows,
    )
    from commsim.bench.calibrate._fit import fit_curve, fit_pieces
    from commsim.bench.calibrate._samples import KINDS, Samples

__all__ = [
    "DEFAULT_FIT_UP_TO",
    "DEFAULT_SIZES",
    "HELD_OUT_FROM",
    "KINDS",
    "SUITES",
    "ClusterFit",
    "LinkFit",
    "Samples",
    "Suite",
    "calibrate",
    "cluster_description",
    "cuda_device_samples",
    "fit_cluster",
    "fit_curve",
    "fit_pieces",
    "jax_device_samples",
    "log_model",
    "machine",
    "mpi_samples",
    "predict_rows",
    "profile_from_samples",
    "suite_of",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "commsim.bench.calibrate._calibrate": (
            "DEFAULT_SIZES",
            "SUITES",
            "Suite",
            "calibrate",
            "cuda_device_samples",
            "jax_device_samples",
            "machine",
            "mpi_samples",
            "profile_from_samples",
            "suite_of",
        ),
        "commsim.bench.calibrate._cluster_fit": (
            "DEFAULT_FIT_UP_TO",
            "HELD_OUT_FROM",
            "ClusterFit",
            "LinkFit",
            "cluster_description",
            "fit_cluster",
            "log_model",
            "predict_rows",
        ),
        "commsim.bench.calibrate._fit": ("fit_curve", "fit_pieces"),
        "commsim.bench.calibrate._samples": ("KINDS", "Samples"),
    },
)
