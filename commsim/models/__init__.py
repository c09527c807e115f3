"""Cost models: map a schedule and a message size to a :class:`Prediction`.

Every model implements the :class:`Model` protocol (``predict``, ``lower_bound``, ``describe``,
``to_dict``), so the command line and notebooks work with any of them.

* :class:`Hockney` — α-β-γ with per-rank clocks, single- or multi-port.
* :func:`lower_bound` — Chan et al. 2007 bounds no algorithm can beat.
"""

from commsim.models._bounds import lower_bound
from commsim.models._model import Model
from commsim.models._prediction import Prediction
from commsim.models.hockney import Hockney

__all__ = ["Hockney", "Model", "Prediction", "lower_bound"]
