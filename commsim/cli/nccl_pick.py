""" "What would NCCL do": the model's choice per row of an nccl-tests log, for ``validate``.

``commsim validate --from-nccl-tests LOG --cluster X -a auto`` does not run one algorithm on
every row: per size it takes the NCCL-like choice the tuner finds fastest
(:func:`commsim.tuner.sweep`) among the rows NCCL chooses from
(:func:`commsim.algorithms.nccl_choices`: ring and tree for allreduce, and NVLS or NVLSTree
where the servers' NVSwitches reduce), each on 1, 2, 4, ...
channels laid out by its row (:func:`commsim.algorithms.on_channels`: spread over the servers'
NICs) and, unless ``--protocol`` fixes one, with the fastest of LL, LL128 and Simple
(:class:`commsim.models.ProtocolChoice`), as NCCL's ``tuning.cc`` picks algorithm × protocol ×
channels per size. Without ``-a auto`` the one schedule runs on ``--channels`` channels. Either
way every row says what ran: a :class:`Pick`.

The most channels tried is :func:`auto_channels` unless ``--channels`` says: the servers' GPUs,
at most 8 (a DGX server's eight compute NICs, one per GPU: the server-ordered rows spread their
channels over ``ranks_per_node`` distinct rails, so more channels repeat a layout and, without a
per-channel cap, only add latency).

References:
    NVIDIA NCCL, ``src/graph/tuning.cc`` (``ncclTopoGetAlgoTime``: the time of every algorithm
    and protocol, the least chosen) and ``src/graph/search.cc`` (channels over the NICs).
    NVIDIA, "DGX H100 User Guide": eight ConnectX-7 400 Gb/s compute ports per system.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.algorithms import on_channels
from commsim.models import Model
from commsim.tuner import channel_counts, sweep

__all__ = ["MAX_AUTO_CHANNELS", "Pick", "auto_channels", "fixed_rows", "pick_rows"]

#: the most channels ``-a auto`` tries without ``--channels``: a DGX server's compute NICs
MAX_AUTO_CHANNELS = 8


@dataclasses.dataclass(frozen=True)
class Pick:
    """What the model ran for one row: the algorithm, its parameters (``channels`` among them
    when more than one) and the protocol (``None``: the links as they are)."""

    algorithm: str
    params: Mapping[str, Any]
    protocol: str | None = None

    def label(self) -> str:
        """``snake_ring x8 Simple``, ``nvls_tree pipeline=64 Simple``: the algorithm, its
        pipeline depths above one (the parameters of :data:`commsim.tuner.GROWN`: what the
        tuner grows, or the row's default), its channels and protocol, for a table."""
        from commsim.tuner import GROWN

        k = int(self.params.get("channels", 1))
        grown = [f"{p}={v}" for p, v in self.params.items() if p in GROWN and v != GROWN[p]]
        return " ".join(
            [
                self.algorithm,
                *grown,
                *([f"x{k}"] if k > 1 else []),
                *([self.protocol] if self.protocol else []),
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "params": dict(self.params),
                "channels": int(self.params.get("channels", 1)), "protocol": self.protocol}  # fmt: skip


def auto_channels(ranks_per_node: int) -> int:
    """The most channels ``-a auto`` tries: the server's GPUs, at most :data:`MAX_AUTO_CHANNELS`.

    Examples:
        >>> auto_channels(8), auto_channels(72), auto_channels(4)
        (8, 8, 4)
    """
    return max(1, min(int(ranks_per_node), MAX_AUTO_CHANNELS))


def _protocols(pred_protocol: Any, n: int, fixed: str | None) -> list[str | None]:
    if pred_protocol is None:
        return [fixed] * n
    return [str(x) for x in np.atleast_1d(np.asarray(pred_protocol, dtype=object))]


def fixed_rows(
    model: Model, schedule: Schedule, sizes: np.ndarray, channels: int, protocol: str | None
) -> tuple[np.ndarray, tuple[Pick, ...]]:
    """``schedule`` on ``channels`` channels at every size: the times (s) and each row's pick
    (the protocol the model chose where ``protocol`` is ``"auto"``)."""
    s = on_channels(schedule, channels)
    pred = model.predict(s, sizes)
    times = np.asarray(pred.time, dtype=np.float64).reshape(-1)
    fixed = None if protocol == "auto" else protocol
    picks = tuple(
        Pick(s.algorithm, s.params, p) for p in _protocols(pred.protocol, len(times), fixed)
    )
    return times, picks


def pick_rows(
    model: Model,
    collective: str,
    nranks: int,
    sizes: np.ndarray,
    ranks_per_node: int,
    channels: int,
    protocol: str | None,
    rows: tuple[str, ...],
) -> tuple[np.ndarray, tuple[Pick, ...], tuple[str, ...]]:
    """Per size, the fastest of ``rows`` (:func:`~commsim.algorithms.nccl_choices`) on up to
    ``channels`` channels (1, 2, 4, ...): the times (s), the picks, and the tuner's notes (rows
    skipped)."""
    result = sweep(
        collective, model, nranks, sizes, algorithms=rows,
        ranks_per_node=ranks_per_node, channels=channel_counts(channels),
    )  # fmt: skip
    best = result.best()
    j = np.searchsorted(result.sizes, np.asarray(sizes, dtype=np.float64))
    win = best[j]
    times = result.times[win, j]
    fixed = None if protocol == "auto" else protocol
    picks = tuple(
        Pick(
            result.candidates[w].algorithm,
            result.candidates[w].params,
            fixed if result.protocols is None else str(result.protocols[w, jj]),
        )
        for w, jj in zip(win, j, strict=True)
    )
    notes = tuple(f"-a auto skipped {a}: {why}" for a, why in result.skipped.items())
    return times, picks, notes
