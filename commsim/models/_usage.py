"""What a network prediction adds to a :class:`~commsim.models.Prediction`: link usage and the
critical path."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from commsim import units

__all__ = ["CriticalPath", "NetworkUsage", "Timeline", "route_kinds"]


def route_kinds(
    kinds: tuple[str, ...], link_kind: np.ndarray, indptr: np.ndarray, links: np.ndarray
) -> tuple[str, ...]:
    """Per route (CSR ``indptr``/``links``), its link classes in order of first use, joined by
    ``"+"`` (``"rail+spine"``)."""
    return tuple(
        "+".join(dict.fromkeys(kinds[k] for k in link_kind[links[a:b]]))
        for a, b in itertools.pairwise(indptr)
    )


@dataclasses.dataclass(frozen=True, eq=False)
class CriticalPath:
    """The chain of messages that made the last rank finish (at the largest size predicted).

    Walking back from the last rank's final message, each message's start waited for the
    message that last set its sender's or receiver's clock, whichever was later.

    Attributes:
        step, src, dst: per message on the chain, first to last.
        start, end: its start (both ends ready) and end, seconds.
        latency, transfer: its path latency and its transfer time (bytes over its rate).
        kinds: per message, the link classes its route crosses (``"+"``-joined).
        wait: time on the chain not spent in messages (reductions, start skew), seconds.
    """

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    start: np.ndarray
    end: np.ndarray
    latency: np.ndarray
    transfer: np.ndarray
    kinds: tuple[str, ...]
    wait: float

    @property
    def nmessages(self) -> int:
        return len(self.step)

    def time_by_kind(self) -> dict[str, float]:
        """Transfer time on the chain per route class (e.g. ``{"nvlink": ..., "host+spine": ...}``)."""
        out: dict[str, float] = {}
        for k, t in zip(self.kinds, self.transfer, strict=True):
            out[k] = out.get(k, 0.0) + float(t)
        return out

    def summary(self) -> str:
        """One line: messages, and the split of the chain's time into latency, transfer, wait
        (parts under a femtosecond are rounding residue and shown as 0s)."""

        def t(x: float) -> str:
            return units.format_time(x if abs(x) >= 1e-15 else 0.0)

        lat, tr = float(self.latency.sum()), float(self.transfer.sum())
        by = sorted(self.time_by_kind().items(), key=lambda kv: -kv[1])
        kinds = ", ".join(f"{k} {t(v)}" for k, v in by[:3])
        return f"{self.nmessages} messages: latency {t(lat)}, transfer {t(tr)} ({kinds}), other {t(self.wait)}"

    @classmethod
    def of_chain(
        cls,
        idx: np.ndarray,
        columns: tuple[np.ndarray, ...],
        route_kinds: tuple[str, ...],
        total: float,
    ) -> CriticalPath:
        """The path of messages ``idx`` (first to last) out of per-message ``columns`` ``(step,
        src, dst, start, end, latency)``; ``route_kinds`` per path message; ``total`` the
        prediction's time (what the messages do not cover is ``wait``)."""
        step, src, dst, start, end, lat = (c[idx] for c in columns)
        transfer = end - start - lat
        wait = float(total - lat.sum() - transfer.sum())
        return cls(step, src, dst, start, end, lat, transfer, route_kinds, max(wait, 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "nmessages": self.nmessages,
            "latency_s": float(self.latency.sum()),
            "transfer_s": float(self.transfer.sum()),
            "other_s": self.wait,
            "transfer_s_by_route_kind": self.time_by_kind(),
            "ranks": sorted({*self.src.tolist(), *self.dst.tolist()})[:64],
        }


@dataclasses.dataclass(frozen=True, eq=False)
class NetworkUsage:
    """Per-link traffic of one prediction. Sizes along the last axis, as in the prediction.

    Attributes:
        kinds: link class names (a network's ``kinds``).
        link_kind: per directed link, its class index.
        link_bytes: bytes each directed link carried, ``[links, sizes]``.
        link_busy: seconds each link spent transmitting (bytes / bandwidth), ``[links, sizes]``.
        time: the prediction's completion time per size.
        time_parts: what the last rank's time is made of along the chain of messages that set
            its clock, ``[4 + kinds, sizes]``: latency, reduction, other (start skew), launch
            (the collective library's per-call cost, :mod:`commsim.models._library`), then
            transfer time per link class (each message's time charged to its bottleneck link's
            class). Its sum over components is ``time``.
        critical_path: see :class:`CriticalPath` (``None`` when not tracked).
    """

    kinds: tuple[str, ...]
    link_kind: np.ndarray
    link_bytes: np.ndarray
    link_busy: np.ndarray
    time: np.ndarray
    time_parts: np.ndarray
    critical_path: CriticalPath | None = None

    @classmethod
    def of_links(
        cls,
        network: Any,
        link_units: np.ndarray,
        per_unit: np.ndarray,
        time: np.ndarray,
        time_parts: np.ndarray,
        critical_path: CriticalPath | None,
        *,
        launch: float = 0.0,
        busy_units: np.ndarray | None = None,
    ) -> NetworkUsage:
        """Usage from the slot units each directed link of ``network`` carried: bytes per size
        (``units × per_unit``) and busy time (bytes / bandwidth; 0 on an infinitely fast link).
        ``busy_units`` (default ``link_units``) counts each message's units over the share of
        the rate it moves at (:func:`commsim.models._library.message_efficiency`: a protocol's
        flags, a reducing switch's efficiency), so busy time is the time the link was in use.

        ``time_parts`` comes as ``[3 + kinds, sizes]`` (latency, reduction, other, link
        classes), its "other" including the per-call ``launch`` every chain starts with; the
        launch becomes a part of its own, after "other"."""
        other = time_parts[2] - launch
        launched = np.full_like(other, launch)
        time_parts = np.concatenate(
            [time_parts[:2], np.maximum(other, 0.0)[None], launched[None], time_parts[3:]]
        )
        link_bytes = np.multiply.outer(link_units, per_unit)
        busy_bytes = link_bytes if busy_units is None else np.multiply.outer(busy_units, per_unit)
        bw = network.bandwidth[:, None]
        with np.errstate(invalid="ignore"):
            busy = np.where(np.isinf(bw), 0.0, busy_bytes / bw)
        return cls(
            network.kinds, network.link_kind, link_bytes, busy, time, time_parts, critical_path
        )

    @property
    def part_names(self) -> tuple[str, ...]:
        """Names of :attr:`time_parts`' rows: latency, reduction, other, launch, then the link
        classes."""
        return ("latency", "reduction", "other", "launch", *self.kinds)

    def _by_kind(self, values: np.ndarray, reduce: Any) -> np.ndarray:
        out = np.zeros((len(self.kinds), values.shape[1]))
        for k in range(len(self.kinds)):
            sel = self.link_kind == k
            if sel.any():
                out[k] = reduce(values[sel], axis=0)
        return out

    @property
    def kind_bytes(self) -> np.ndarray:
        """Bytes per link class, ``[kinds, sizes]``."""
        return self._by_kind(self.link_bytes, np.sum)

    @property
    def kind_busiest(self) -> np.ndarray:
        """Busy time of the busiest link of each class, ``[kinds, sizes]``."""
        return self._by_kind(self.link_busy, np.max)

    @property
    def utilization(self) -> np.ndarray:
        """Busiest link's busy time over the completion time, per class, ``[kinds, sizes]``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.time > 0, self.kind_busiest / self.time, 0.0)

    @property
    def limiting(self) -> tuple[str, ...]:
        """Per size, the largest part of the last rank's time (:attr:`time_parts`): a link class
        (its transfers dominate: faster links of that class would help most), ``"latency"``
        (per-message latencies dominate), ``"reduction"`` (reduction arithmetic) or
        ``"launch"`` (the library's per-call cost)."""
        names = self.part_names
        return tuple(
            names[int(np.argmax(self.time_parts[:, j]))] for j in range(self.time_parts.shape[1])
        )

    def to_dict(self) -> dict[str, Any]:
        util = self.utilization
        return {
            "limited_by": list(self.limiting),
            "time_parts_s": {k: self.time_parts[i].tolist() for i, k in enumerate(self.part_names)},
            "link_classes": {
                k: {"bytes": self.kind_bytes[i].tolist(), "utilization": util[i].tolist()}
                for i, k in enumerate(self.kinds)
            },
            "critical_path": None if self.critical_path is None else self.critical_path.to_dict(),
        }


@dataclasses.dataclass(frozen=True, eq=False)
class Timeline:
    """Every message of one prediction at one size, in the order they were timed.

    Attributes:
        step, src, dst: per message.
        start, end: when both ends were ready (the sender began), and when it arrived (seconds).
        reduce_end: when its receiver finished reducing it (``end`` if it does not reduce).
        recv_start: when its receiver began taking it (``start`` under rendezvous models; later
            under LogGP, where a message waits for its receiver's CPU and NIC).
        send_end: when its sender was done with it (``end`` under rendezvous models; the send
            overhead under LogGP).
        indptr, links: its route, CSR (directed link ids of ``network``); ``None`` for models
            without a network.
        network: the network whose links ``links`` indexes (``None`` without one).
        local_rank, local_start, local_end: reductions of a rank into its own buffer (local
            transfers), one per rank and step that has some.
    """

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    start: np.ndarray
    end: np.ndarray
    reduce_end: np.ndarray
    indptr: np.ndarray | None = None
    links: np.ndarray | None = None
    network: Any = None
    recv_start: np.ndarray | None = None
    send_end: np.ndarray | None = None
    local_rank: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    local_start: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    local_end: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        if self.recv_start is None:
            object.__setattr__(self, "recv_start", self.start)
        if self.send_end is None:
            object.__setattr__(self, "send_end", self.end)

    @property
    def nmessages(self) -> int:
        return len(self.step)

    @property
    def last_end(self) -> float:
        """When the last rank finished (the prediction's time, when nothing else ran)."""
        ends = (self.reduce_end, self.send_end, self.local_end)
        return max((float(e.max()) for e in ends if len(e)), default=0.0)
