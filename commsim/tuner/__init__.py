"""A model-guided tuner: per message size, the fastest algorithm and its parameters.

Like NCCL's choice of algorithm and protocol per size, but read from a cost model:
:func:`tune` predicts every candidate (each algorithm, with its pipeline depth ``segments`` tried
at 1, 2, 4, … per size, and with ``channels=`` on 1, 2, 4, … channels, :func:`channel_counts`)
at every size, keeps the fastest per size and merges equal choices into
size ranges, a :class:`TunerTable`. The table saves to TOML and loads back
(:meth:`TunerTable.save`, :meth:`TunerTable.load`), and ``table.schedule(nbytes)`` builds the
choice for a size: the drop-in collectives call it per message. :func:`as_model` resolves what
:func:`tune` accepts as a model (a model, a cluster, a profile) into the model it predicts with;
:func:`cluster_model` is a cluster's topology model.

Examples:
    >>> import commsim
    >>> t = commsim.tune("allreduce", commsim.models.Hockney(), 64, "1KiB..1GiB:x1024")
    >>> [r.algorithm for r in t.ranges][0]
    'recursive_doubling'
    >>> t.schedule(1 << 30).nranks
    64
"""

from typing import TYPE_CHECKING

from commsim._lazy import lazy_exports

if TYPE_CHECKING:
    from commsim.tuner._candidates import GROWN
    from commsim.tuner._inputs import as_model, cluster_model
    from commsim.tuner._sweep import Sweep, channel_counts, sweep
    from commsim.tuner._table import Range, TunerTable, table_from_sweep
    from commsim.tuner._tune import tune

__all__ = [
    "GROWN",
    "Range",
    "Sweep",
    "TunerTable",
    "as_model",
    "channel_counts",
    "cluster_model",
    "sweep",
    "table_from_sweep",
    "tune",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "commsim.tuner._candidates": ("GROWN",),
        "commsim.tuner._inputs": ("as_model", "cluster_model"),
        "commsim.tuner._sweep": ("Sweep", "channel_counts", "sweep"),
        "commsim.tuner._table": ("Range", "TunerTable", "table_from_sweep"),
        "commsim.tuner._tune": ("tune",),
    },
)
