"""Calibration: measure a transport, fit model parameters to it, write a profile.

* :func:`calibrate`: run a backend's microbenchmarks (MPI through mpi4py under ``mpirun``, JAX
  devices, CUDA devices) and fit them: a :class:`commsim.profiles.Profile`.
* :class:`Samples`: what one microbenchmark measured (raw times per size and repeat).
* :func:`fit_curve`, :func:`fit_pieces`: the robust piecewise-linear fits (breakpoints from the
  data, by the BIC), with their quality; :func:`fit_at` with given breakpoints;
  :func:`splits_of`, every piece count's best split (:class:`Splits`: the fewest pieces
  within a tolerance, or a given number).
* :func:`fit_stable`: the fit of samples taken in blocks: the fewest pieces within
  :data:`TOLERANCE`, each breakpoint's support among resamples of the blocks, and a 95 %
  interval for every parameter.
* :func:`profile_from_samples`: samples to a profile (γ, LogGP, the per-call overhead).
* :func:`fit_cluster`: a cluster's link latency and efficiency fitted to an nccl-tests log
  (:class:`commsim.interop.NcclTestsLog`), a :class:`ClusterFit`; :func:`predict_rows`, the
  cluster's prediction of every row and :func:`log_model` its model (a protocol chosen);
  :func:`cluster_description`, a preset or file as the fit
  reads it.
* :func:`fit_library`: NCCL's own cost model (a line per protocol, their lower envelope) fitted to
  an nccl-tests log: launch, bus bandwidth, protocol efficiencies, and what the log cannot
  identify (:class:`LibraryFit`).

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
        DEFAULT_BLOCKS,
        DEFAULT_REPEATS,
        DEFAULT_SIZES,
        SUITES,
        Suite,
        calibrate,
        cuda_device_samples,
        default_blocks,
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
    from commsim.bench.calibrate._fit import Splits, fit_at, fit_curve, fit_pieces, splits_of
    from commsim.bench.calibrate._library_fit import (
        LibraryFit,
        ProtocolLine,
        fit_library,
        library_times,
    )
    from commsim.bench.calibrate._samples import KINDS, Samples
    from commsim.bench.calibrate._stability import (
        REPLICATES,
        SUPPORT,
        TOLERANCE,
        expanded_level,
        fit_stable,
    )

__all__ = [
    "DEFAULT_BLOCKS",
    "DEFAULT_FIT_UP_TO",
    "DEFAULT_REPEATS",
    "DEFAULT_SIZES",
    "HELD_OUT_FROM",
    "KINDS",
    "REPLICATES",
    "SUITES",
    "SUPPORT",
    "TOLERANCE",
    "ClusterFit",
    "LibraryFit",
    "LinkFit",
    "ProtocolLine",
    "Samples",
    "Splits",
    "Suite",
    "calibrate",
    "cluster_description",
    "cuda_device_samples",
    "default_blocks",
    "expanded_level",
    "fit_at",
    "fit_cluster",
    "fit_curve",
    "fit_library",
    "fit_pieces",
    "fit_stable",
    "jax_device_samples",
    "library_times",
    "log_model",
    "machine",
    "mpi_samples",
    "predict_rows",
    "profile_from_samples",
    "splits_of",
    "suite_of",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "commsim.bench.calibrate._calibrate": (
            "DEFAULT_BLOCKS",
            "DEFAULT_REPEATS",
            "DEFAULT_SIZES",
            "SUITES",
            "Suite",
            "calibrate",
            "cuda_device_samples",
            "default_blocks",
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
        "commsim.bench.calibrate._fit": (
            "Splits",
            "fit_at",
            "fit_curve",
            "fit_pieces",
            "splits_of",
        ),
        "commsim.bench.calibrate._library_fit": (
            "LibraryFit",
            "ProtocolLine",
            "fit_library",
            "library_times",
        ),
        "commsim.bench.calibrate._samples": ("KINDS", "Samples"),
        "commsim.bench.calibrate._stability": (
            "REPLICATES",
            "SUPPORT",
            "TOLERANCE",
            "expanded_level",
            "fit_stable",
        ),
    },
)
