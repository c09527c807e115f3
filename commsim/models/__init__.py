"""Cost models: map a schedule and a message size to a :class:`Prediction`.

Every model implements the :class:`Model` protocol (``predict``, ``lower_bound``, ``timeline``,
``describe``, ``to_dict``), so the command line and notebooks work with any of them, and builds
its :class:`Prediction` with :meth:`Prediction.from_clocks` (one constructor, one note for a
prediction below the model's bound).

* :class:`Hockney` — α-β-γ with per-rank clocks, single- or multi-port.
* :class:`LogGP` — L, o, g, G with eager sends (LogGOPSim's rules).
* :class:`TwoLevelHockney` — Hockney with intra- and inter-server α, β.
* :class:`Topology` — a network graph, placement and link contention; with a cluster, the
  collective library's layer too (per-call launch, overlapped reductions, protocols:
  ``docs/library.md``).
* :class:`ProtocolChoice` — per size, the fastest of NCCL's protocols LL, LL128, Simple.
* :func:`lower_bound` — Chan et al. 2007 bounds no algorithm can beat; :func:`bound_of` — any
  model's bound and the name of the one that binds (the topology model's injection, cut or
  bisection bound, ``docs/bounds.md``).
* :func:`fastest` / :func:`tied` — which predictions win, ties (within :data:`TIE_RTOL`) to
  the earlier candidate.
* :func:`chrome_trace` — a prediction as a Chrome trace (Perfetto); :func:`step_trace` the same
  format for measured steps.
* :class:`Twin` (:mod:`commsim.models.twin`, imports JAX on first use) — a model's time for
  one schedule as a pure JAX function of its parameters: ``jit``, ``vmap``, ``grad``.
* :func:`as_sizes` — message sizes read as every model reads ``nbytes`` (numbers, arrays, unit
  strings such as ``"1KiB..1GiB"``), for code that sweeps sizes beside a model (the tuner).

:func:`compressed` is any model with its messages in a wire format (fp16, bf16, int8): the bytes
scaled before they reach it, the conversion added to γ (``docs/compression.md``).
"""

from typing import TYPE_CHECKING

from commsim._lazy import lazy_exports

if TYPE_CHECKING:
    from commsim.models._bounds import bound_of, lower_bound
    from commsim.models._compressed import Compressed, compressed
    from commsim.models._contention import CONTENTION
    from commsim.models._inputs import as_sizes
    from commsim.models._library import PROTOCOLS, Protocol
    from commsim.models._link_ports import PORT_RULES
    from commsim.models._model import Model
    from commsim.models._network_params import FLOW_RULES
    from commsim.models._prediction import TIE_RTOL, Prediction, fastest, tied
    from commsim.models._protocol_choice import ProtocolChoice
    from commsim.models._trace import ChromeTrace, chrome_trace, step_trace
    from commsim.models._usage import CriticalPath, NetworkUsage, Timeline
    from commsim.models.hockney import Hockney
    from commsim.models.loggp import LogGP
    from commsim.models.topology import Topology
    from commsim.models.two_level import TwoLevelHockney

__all__ = [
    "CONTENTION",
    "FLOW_RULES",
    "PORT_RULES",
    "PROTOCOLS",
    "TIE_RTOL",
    "ChromeTrace",
    "Compressed",
    "CriticalPath",
    "Hockney",
    "LogGP",
    "Model",
    "NetworkUsage",
    "Prediction",
    "Protocol",
    "ProtocolChoice",
    "Timeline",
    "Topology",
    "Twin",
    "TwoLevelHockney",
    "as_sizes",
    "bound_of",
    "chrome_trace",
    "compressed",
    "fastest",
    "lower_bound",
    "step_trace",
    "tied",
]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "commsim.models._bounds": ("bound_of", "lower_bound"),
        "commsim.models._compressed": ("Compressed", "compressed"),
        "commsim.models._contention": ("CONTENTION",),
        "commsim.models._inputs": ("as_sizes",),
        "commsim.models._library": ("PROTOCOLS", "Protocol"),
        "commsim.models._link_ports": ("PORT_RULES",),
        "commsim.models._model": ("Model",),
        "commsim.models._network_params": ("FLOW_RULES",),
        "commsim.models._prediction": ("TIE_RTOL", "Prediction", "fastest", "tied"),
        "commsim.models._protocol_choice": ("ProtocolChoice",),
        "commsim.models._trace": ("ChromeTrace", "chrome_trace", "step_trace"),
        "commsim.models._usage": ("CriticalPath", "NetworkUsage", "Timeline"),
        "commsim.models.hockney": ("Hockney",),
        "commsim.models.loggp": ("LogGP",),
        "commsim.models.topology": ("Topology",),
        "commsim.models.two_level": ("TwoLevelHockney",),
        "commsim.models.twin": ("Twin",),  # imports JAX
    },
)
