"""Measured transports: piecewise-linear message times, γ, LogGP's parameters, per-call overhead.

A :class:`Profile` is what ``commsim calibrate`` measures and writes (:func:`save_profile`, TOML)
and what the models read (``commsim predict --profile``, :meth:`commsim.models.Hockney.from_profile`,
:meth:`commsim.models.LogGP.from_profile`); a cluster file can take one link class's latency and
bandwidth from a profile. This package sits low (it imports only ``errors`` and ``units``), so
models, clusters and bench can all read it.

Examples:
    >>> from commsim.profiles import Piece, PiecewiseLinear
    >>> f = PiecewiseLinear.hockney(alpha=2e-6, beta=1e-9)
    >>> round(float(f(1000)) * 1e6, 6)  # 2 us + 1000 B * 1 ns
    3.0
"""

from commsim.profiles._intervals import FitIntervals
from commsim.profiles._pieces import Piece, PiecewiseLinear
from commsim.profiles._profile import Curve, FitQuality, LogGPParameters, Profile
from commsim.profiles._step_reduction import StepReduction
from commsim.profiles._toml import is_profile_file, load_profile, save_profile

__all__ = [
    "Curve",
    "FitIntervals",
    "FitQuality",
    "LogGPParameters",
    "Piece",
    "PiecewiseLinear",
    "Profile",
    "StepReduction",
    "is_profile_file",
    "load_profile",
    "save_profile",
]
