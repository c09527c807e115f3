""":func:`tune`: the one call from a model (or a cluster, or a profile) to a :class:`TunerTable`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commsim.tuner._candidates import MAX_WORK, MIN_SLOT_BYTES
from commsim.tuner._inputs import as_model
from commsim.tuner._sweep import sweep
from commsim.tuner._table import TunerTable, table_from_sweep

__all__ = ["tune"]


def tune(
    collective: str,
    model: Any,
    nranks: int,
    sizes: Any,
    *,
    algorithms: Sequence[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool | None = False,
    max_work: int = MAX_WORK,
    min_slot_bytes: float = MIN_SLOT_BYTES,
    channels: Sequence[int] = (1,),
) -> TunerTable:
    """Choose the fastest algorithm and parameters per size range under a model.

    Every algorithm of ``collective`` (or of ``algorithms``) is a candidate with its parameters
    fixed at their defaults, except ``segments``, which is tried at 1, 2, 4, … up to a cap set by
    the largest size and an evaluation budget, and a parameter with declared choices (a row's
    ``choices``, such as ``order``), tried at each value (:mod:`commsim.tuner._candidates`); ``params`` fixes
    a parameter (a value) or lists its candidates (a list). Each candidate is predicted at every
    size in one vectorized call; per size the fastest wins, and equal consecutive choices merge
    into ranges (:mod:`commsim.tuner._table`).

    Args:
        collective: ``"allreduce"``, ``"allgather"``, ...
        model: a :class:`commsim.models.Model`; a cluster (a preset such as ``"dgx-h100:16"``, a
            cluster ``.toml`` file, or a :class:`commsim.clusters.Cluster`: the topology model,
            and its ``ranks_per_node`` for the hierarchical algorithms); or a profile (a file of
            ``commsim calibrate -o``, or a :class:`commsim.profiles.Profile`: Hockney on it).
        nranks: ranks.
        sizes: bytes (an array, a number) or a unit string such as ``"1KiB..1GiB"``.
        algorithms: the candidates' algorithms (default: every registered one).
        params: per algorithm, a list of candidate values or one fixed value (a tuple is one
            value): ``{"nccl_tree": {"segments": [4, 16, 64], "ranks_per_node": 4}}``.
        progress: ``True`` a progress bar on stderr, ``False`` none, ``None`` for long runs only.
        max_work, min_slot_bytes: where growing ``segments`` stops.
        channels: channel counts to try each candidate on (``(1, 2, 4, 8)``; default one
            channel): the winner's count is its ``channels`` parameter, and
            ``schedule(nbytes)`` builds it on them (:func:`commsim.algorithms.channels`).

    Returns:
        A :class:`TunerTable`; its ``schedule(nbytes)`` builds the choice for a size.

    Examples:
        >>> import commsim
        >>> from commsim.models import Hockney
        >>> t = commsim.tune("broadcast", Hockney(), 16, "1KiB..64MiB:x64")
        >>> t.lookup(1024).algorithm, t.lookup(64 << 20).algorithm
        ('binomial', 'chain')
        >>> t.lookup(64 << 20).params["segments"] > 1
        True
    """
    source = as_model(model)
    result = sweep(
        collective,
        source.model,
        nranks,
        sizes,
        algorithms=algorithms,
        params=params,
        ranks_per_node=source.ranks_per_node(nranks),
        progress=progress,
        max_work=max_work,
        min_slot_bytes=min_slot_bytes,
        channels=channels,
    )
    return table_from_sweep(result)
