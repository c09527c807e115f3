"""Calibration: measure a transport, fit model parameters to it, write a profile.

(Filled in as the pieces land; see issue #9.)
"""

from commsim.bench.calibrate._samples import KINDS, Samples

__all__ = ["KINDS", "Samples"]
