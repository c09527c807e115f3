"""Calibration: measure a transport, fit model parameters to it, write a profile.

* :func:`calibrate`: run a backend's microbenchmarks (MPI through mpi4py under ``mpirun``, JAX
  devices, CUDA devices) and fit them: a :class:`commsim.profiles.Profile`.
* :class:`Samples`: what one microbenchmark measured (raw times per size and repeat).
* :func:`fit_curve`, :func:`fit_pieces`: the robust piecewise-linear fits (breakpoints from the
  data), with their quality.
* :func:`profile_from_samples`: samples to a profile (γ, LogGP, the per-call overhead).

Examples:
    >>> import numpy as np
    >>> n = 2.0 ** np.arange(3, 20)
    >>> s = Samples("pingpong", n, np.outer(1e-6 + n / 5e9, np.ones(5)), "mpi", 2)
    >>> c = fit_curve(s)
    >>> round(c.fit.pieces[0].alpha * 1e6, 3), round(1 / c.fit.pieces[0].beta / 1e9, 3)
    (1.0, 5.0)
"""

from commsim.bench.calibrate._calibrate import (
    DEFAULT_SIZES,
    calibrate,
    cuda_device_samples,
    jax_device_samples,
    machine,
    mpi_samples,
    profile_from_samples,
)
from commsim.bench.calibrate._fit import fit_curve, fit_pieces
from commsim.bench.calibrate._samples import KINDS, Samples

__all__ = [
    "DEFAULT_SIZES",
    "KINDS",
    "Samples",
    "calibrate",
    "cuda_device_samples",
    "fit_curve",
    "fit_pieces",
    "jax_device_samples",
    "machine",
    "mpi_samples",
    "profile_from_samples",
]
