"""Cost models: map a schedule and a message size to a :class:`Prediction`.

* :class:`Hockney` — α-β-γ with per-rank clocks, single- or multi-port.
* :func:`lower_bound` — Chan et al. 2007 bounds no algorithm can beat.
"""

from commsim.models._bounds import lower_bound
from commsim.models._prediction import Prediction
from commsim.models.hockney import Hockney

__all__ = ["Hockney", "Prediction", "lower_bound"]
