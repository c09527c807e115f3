r"""The Hockney α-β-γ model with per-rank clocks.

A message of :math:`b` bytes costs :math:`\alpha + b\beta`; reducing :math:`b` received bytes costs
:math:`b\gamma` (Hockney, "The communication challenge for MPP", Parallel Computing 20, 1994; the γ
term as in Thakur, Rabenseifner & Gropp 2005 and Chan et al. 2007).

How a schedule is timed (the IR's semantics made quantitative):

* Transfers of one ``(step, src, dst)`` are one message; local transfers are free copies, or local
  reductions costing :math:`b\gamma` at the end of the step.
* **Per-rank clocks.** Each step's messages are split into rounds in which every rank sends and
  receives at most once (:func:`commsim._messages.matchings`). In a round, the message
  :math:`q \to r` starts when both ends are ready, :math:`s = \max(c_q, c_r)`, and ends at
  :math:`e = s + \alpha + b\beta`; then :math:`c_q \leftarrow \max(c_q, e)` and
  :math:`c_r \leftarrow \max(c_r, e + b_\text{red}\gamma)`. Ranks idle in a step keep their clock.
* **Single-port, full-duplex** (default, ``ports=1``): a rank sends one message and receives one
  at a time, and may do both at once; its messages in a step run round after round.
* **A measured transport** (``message=``, a :class:`commsim.profiles.PiecewiseLinear`, or
  :meth:`Hockney.from_profile`): a message of :math:`b` bytes costs :math:`t(b) = \alpha_k + b\beta_k`
  in the piece :math:`k` its size falls in (a calibrated curve, linear between protocol switches)
  instead of one :math:`\alpha + b\beta`; everything else is as above. Such steps take the
  numpy path (one array operation per round), not the compiled one.
* **A measured reduction in a step** (``reduction=``, a :class:`commsim.profiles.StepReduction`,
  which :meth:`Hockney.from_profile` takes from a profile with a ``step`` curve): a message
  whose receiver reduces :math:`b` bytes costs it :math:`r(b)`, what a reduction measured inside
  an exchange-and-reduce step costs (on a shared-memory transport, the cores trading the
  buffers' cache lines), in place of :math:`b\gamma`; with k ports, a rank's reductions of one
  round cost :math:`r(\sum b)`. A local reduction (no message) costs what the reduction alone
  costs (:attr:`~commsim.profiles.StepReduction.alone`, else :math:`b\gamma`). γ becomes
  :math:`r`'s floor, the lower bound's. A uniform step that reduces moves the level clocks by
  :math:`\alpha + u\beta + r(u)`; other steps that reduce take the numpy path, and steps that
  reduce nothing keep the fast paths.
* **k ports sharing one link** (``ports=k``; ``"multi"``: as many as the step needs). A rank keeps
  up to ``k`` sends and ``k`` receives in flight, but they share its link, as in the k-port model
  of Bruck et al. (1997) and Chan et al. (2007): ``k`` consecutive rounds of the decomposition run
  as one, each of its messages ending at
  :math:`s + \alpha + \beta \max(S_q, R_r)`, where :math:`S_q` and :math:`R_r` are the bytes its
  sender sends and its receiver receives in that round; a rank's reductions add up after its last
  arrival. More ports buy latency (one :math:`\alpha` for ``k`` messages), never bandwidth: a
  rank still pushes every byte through one link, so the lower bound keeps its β and γ terms and
  its latency term becomes :math:`\lceil \log_{k+1} p \rceil \alpha`
  (:meth:`Hockney.lower_bound`). With ``k = 1`` this is the single-port rule exactly.

* **Independent links** (``links=L``, IR rule 6): a rank has ``L`` links, each with its own β;
  a schedule's channel ``c`` runs on link ``c mod L``, with its own clock (one per rank and link),
  so channels on different links progress independently and their messages are in flight at
  once. Channels that share a link take turns on it, in step order. ``L = 1`` (the default) is
  the single-link machine, whatever the schedule's channels. The bound becomes the injection
  bound :math:`\lceil \log_{L+1} p \rceil \alpha + (f_\beta(p)\,n\beta + f_\gamma(p)\,n\gamma)/L`
  (each link's receiver reduces on its own).

The completion time is the largest final clock (a rank's, over its links). Under these rules the textbook algorithms
reproduce their published closed forms exactly (each factory's docstring states its own).

Cost of the model itself: one pass over the steps for all sizes at once. **Level clocks**
first: all ranks start at one clock, and a **uniform step** (every rank sends exactly one message
and receives exactly one, all of :math:`u` units and one reduce flag: a ring's shift, a recursive
exchange, a pairwise alltoall round) keeps them equal, moving the common clock :math:`c` to
:math:`c + \alpha + u\beta` (:math:`+\,u\gamma` when it reduces): the per-rank rule above with
both ends at :math:`c`, in the kernels' order of operations, so the same bits. Such a step costs
a check of its arrays instead of a clock update per transfer, and arrays a step function
declares shared between steps (a ring's ranks, counts and flags:
:func:`commsim._ir.share_between_steps`) or that are read-only are checked once, so a ring allreduce at
p = 16,384 (537 M transfers) takes about a second for any number of sizes. The first step that
is not uniform hands every rank the common clock and the per-rank path below goes on from
there. (A step of whole shift classes, every rank to every other as in a direct all-to-all,
moves the common clock class by class, as the general path's rounds would.) Single-port steps
of distinct messages run in compiled kernels: one size in one pass over the transfers
(:mod:`commsim.models._kernels`); many sizes on shared clocks, where each distinct clock vector
is stored once and a message's arithmetic runs once per distinct pair of end clocks
(:mod:`commsim.models._shared_clocks`), so a ring's 21 sizes cost about what one does. Both do
the dense ``[ranks, sizes]`` kernel's arithmetic in its order: one size alone and the same size
among many give the same bits. Other steps take the general path, ``O(messages · sizes)``
array work per round. A prediction of at most
:data:`~commsim.models._numpy_kernels.NUMPY_MAX_WORK` transfer-size pairs (a ring at p = 1024,
one size) runs the same arithmetic as array kernels (:mod:`commsim.models._numpy_kernels`, on
dense clocks) instead: the same bits, without numba's start-up (0.7-1.2 s of CPU).

:meth:`Hockney.timeline` runs the same clocks at one size and also keeps every message's start,
arrival and reduction end (what :func:`commsim.models.chrome_trace` draws): the rounds go
through the general path's kernel, whose arithmetic is the fast path's, so its last end is
:meth:`Hockney.predict`'s time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim import units
from commsim._ir import Schedule, Step, is_shared, shared_bounds
from commsim._messages import port_messages, remembered
from commsim.errors import ParameterError
from commsim.models import _numpy_kernels
from commsim.models._bounds import lower_bound
from commsim.models._inputs import (
    as_inverse_bandwidth,
    as_links,
    as_ports,
    as_schedule,
    as_sizes,
    as_time,
)
from commsim.models._prediction import Prediction
from commsim.models._record import Recorder
from commsim.models._shared_clocks import SharedClocks
from commsim.models._usage import Timeline
from commsim.profiles import PiecewiseLinear, Profile, StepReduction

__all__ = ["Hockney"]


class Hockney:
    """The α-β-γ model (implements :class:`commsim.models.Model`).

    The defaults describe a 200 Gb/s (HDR) InfiniBand cluster, and are the command line's too:
    α = 2 µs per message (MPI latency through one switch), β = 1/(25 GB/s) (the link's byte
    rate), γ = 1/(100 GB/s) (a reduction kernel streaming near memory bandwidth).

    Args:
        alpha: latency per message, seconds (or a time string: ``"2us"``).
        beta: transfer time per byte, seconds/byte (or a bandwidth string: ``"25GB/s"``).
        gamma: reduction time per byte, seconds/byte (or a bandwidth string).
        ports: ``1`` or ``"single"`` (one send and one receive at a time, full duplex), ``k > 1``
            (k at a time, sharing the rank's link), or ``"multi"`` (every message of a step at
            once, sharing the link).
        links: independent links per rank, each with its own β: channel ``c`` of a schedule
            runs on link ``c mod links`` (``1``: one link, the textbook machine).
        message: a measured message time (:class:`commsim.profiles.PiecewiseLinear`) that
            replaces ``alpha`` and ``beta``; they become its smallest α and β (the lower bound's).
        reduction: a measured reduction inside a step (:class:`commsim.profiles.StepReduction`)
            that replaces ``gamma``, which becomes its floor (the lower bound's).
        source: where ``message`` came from, for :meth:`describe` (a profile's file).

    Examples:
        >>> import commsim
        >>> m = Hockney(alpha=1e-6, beta=1e-9, gamma=0.0)
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> round(m.predict(s, nbytes=4000).time * 1e6, 6)  # 2·3·1us + 2·(3/4)·4000 B·1ns
        12.0
    """

    name = "hockney"

    def __init__(
        self,
        alpha: float = 2e-6,
        beta: float = 1 / 25e9,
        gamma: float = 1 / 100e9,
        ports: int | str = "single",
        *,
        links: int = 1,
        message: PiecewiseLinear | None = None,
        reduction: StepReduction | None = None,
        source: str = "",
    ) -> None:
        self.alpha = as_time("alpha", alpha)
        self.beta = as_inverse_bandwidth("beta", beta)
        self.gamma = as_inverse_bandwidth("gamma", gamma)
        self.ports = as_ports(ports)
        self.links = as_links(links)
        if self.links > 1 and self.ports != "single":
            raise ParameterError(
                "give ports (k ports sharing one link) or links (independent links), not both"
            )
        self.message, self.source = message, source
        if message is not None:
            if not isinstance(message, PiecewiseLinear):
                raise ParameterError(
                    f"message must be a commsim.profiles.PiecewiseLinear, got {message!r}"
                )
            self.alpha, self.beta = message.alpha_min, message.beta_min
        self.reduction = reduction
        if reduction is not None:
            if not isinstance(reduction, StepReduction):
                raise ParameterError(
                    f"reduction must be a commsim.profiles.StepReduction, got {reduction!r}"
                )
            self.gamma = reduction.gamma  # r(b) >= b·gamma: the lower bound's

    @classmethod
    def from_profile(
        cls, profile: Profile, *, ports: int | str = "single", links: int = 1
    ) -> Hockney:
        """The model of a measured transport: the profile's message curve
        (:meth:`commsim.profiles.Profile.message_curve`), and its reduction inside a step
        (:meth:`commsim.profiles.Profile.step_reduction`) where it has a ``step`` curve, else
        its γ."""
        curve = profile.message_curve()
        src = f"{profile.source or 'profile'} {curve.kind} curve"
        return cls(
            gamma=profile.gamma, ports=ports, links=links, message=curve.fit,
            reduction=profile.step_reduction(), source=src,
        )  # fmt: skip

    @property
    def piecewise(self) -> PiecewiseLinear | None:
        """The measured message time when it has more than one piece (else α, β say it all)."""
        return self.message if self.message is not None and len(self.message.pieces) > 1 else None

    def __repr__(self) -> str:
        links = f", links={self.links}" if self.links > 1 else ""
        red = f", reduction={self.reduction!r}" if self.reduction is not None else ""
        if self.message is not None:
            return (
                f"Hockney(message={self.message!r}, gamma={self.gamma:g}{red}, "
                f"ports={self.ports!r}{links})"
            )
        return (
            f"Hockney(alpha={self.alpha:g}, beta={self.beta:g}, gamma={self.gamma:g}{red}, "
            f"ports={self.ports!r}{links})"
        )

    def describe(self) -> str:
        """E.g. ``Hockney alpha=2us beta=1/(25 GB/s) gamma=1/(100 GB/s) single-port``."""

        def inverse(x: float) -> str:
            return "0s/B" if x == 0 else f"1/({units.format_bandwidth(1 / x)})"

        port = f"{self.ports}-port" + (" (shared link)" if self.ports not in ("single", 1) else "")
        if self.links > 1:
            port = f"{self.links} independent links"
        red = (
            f"gamma={inverse(self.gamma)}"
            if self.reduction is None
            else f"{self.reduction.describe()} (step curve)"
        )
        if self.message is not None:
            n = len(self.message.pieces)
            return (
                f"Hockney measured ({self.source or 'message curve'}: {n} piece"
                f"{'s' if n > 1 else ''}, alpha {units.format_time(float(self.message(0)))}) "
                f"{red} {port}"
            )
        return (
            f"Hockney alpha={units.format_time(self.alpha)} beta={inverse(self.beta)} {red} {port}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "alpha_s": self.alpha,
            "beta_s_per_byte": self.beta,
            "gamma_s_per_byte": self.gamma,
            "ports": self.ports,
            "links": self.links,
            **({"message": self.message.to_dict(), "source": self.source} if self.message else {}),
            **({"reduction": self.reduction.to_dict()} if self.reduction is not None else {}),
        }

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        """Chan et al. 2007's bound with this model's α, β, γ (:func:`commsim.models.lower_bound`);
        with several links, the injection bound (every link of a rank busy); ``helpers``: ranks
        that hold no data (IR rule 7)."""
        return lower_bound(
            collective, nranks, nbytes, self.alpha, self.beta, self.gamma,
            ports=self._k(nranks), links=self.links, helpers=helpers,
        )  # fmt: skip

    @property
    def bound_name(self) -> str:  # type: ignore[override]
        """The bound :meth:`lower_bound` computes, for table headers."""
        if self.links > 1:
            return f"injection bound ({self.links} links per rank)"
        return "Chan et al. 2007 lower bound"

    def _k(self, nranks: int) -> int:
        """Ports per rank: 1 for single-port, every peer for ``"multi"``."""
        if self.ports == "single":
            return 1
        return max(nranks - 1, 1) if self.ports == "multi" else int(self.ports)

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Time ``schedule`` for message size(s) ``nbytes``: bytes as a number, a 1-D array, or a
        size string (``"1MiB"``, ``"1KiB..1GiB"``)."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        clocks = self._run(schedule, sizes)
        return Prediction.from_clocks(
            schedule, sizes, scalar, clocks.rank_clock(), clocks.step_time, model=self
        )

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """Every message's start, arrival and reduction end at one message size (what
        :func:`commsim.models.chrome_trace` draws), from the clocks :meth:`predict` runs.

        Single-port only (k ports overlap a rank's messages, which a trace's tracks cannot
        show); refuses (:class:`~commsim.errors.ResourceError`) as soon as the schedule has more
        than ``max_messages`` messages.

        Examples:
            >>> import commsim
            >>> s = commsim.build("allreduce", "ring", nranks=4)
            >>> m = Hockney()
            >>> tl = m.timeline(s, "1MiB")
            >>> tl.nmessages, tl.last_end == m.predict(s, "1MiB").time
            (24, True)
        """
        schedule = as_schedule(schedule)
        sizes, _ = as_sizes(nbytes)
        if len(sizes) != 1:
            raise ParameterError("a timeline is for one message size")
        if self._k(schedule.nranks) != 1 or self.links > 1:
            raise ParameterError(
                f"a timeline needs a single-port, single-link Hockney model, not "
                f"ports={self.ports!r}, links={self.links} (they overlap a rank's messages)"
            )
        recorder = Recorder(max_messages)
        self._run(schedule, sizes, recorder)
        return recorder.timeline()

    def _run(
        self, schedule: Schedule, sizes: np.ndarray, recorder: Recorder | None = None
    ) -> _Clocks:
        """The clocks after every step of ``schedule`` (the one computation of both
        :meth:`predict` and :meth:`timeline`)."""
        schedule.spec.check_layout(schedule.nranks, schedule.ndata)  # allgather: p·m data slots
        clocks = _Clocks(self, schedule, sizes, recorder)
        for i, st in enumerate(schedule.steps()):
            clocks.step(i, st)
        return clocks


def _in_bounds(slot: np.ndarray, count: int, nslots: int) -> bool:
    """Whether every range ``[slot, slot + count)`` lies in ``[0, nslots)`` (free for a view of
    an array shared between steps whose range fits: :func:`commsim._ir.shared_bounds`)."""
    if len(slot) == 0:
        return True
    known = shared_bounds(slot)
    if known is not None and known[0] >= 0 and known[1] <= nslots - count:
        return True
    return int(slot.min()) >= 0 and int(slot.max()) <= nslots - count


def _read_only(a: np.ndarray) -> bool:
    """Whether ``a`` is declared shared between steps (:func:`commsim._ir.share_between_steps`),
    or it and every array it views are read-only (nothing can change its values without first
    making them writeable again)."""
    if is_shared(a):
        return True
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return a is None


class _Clocks:
    """The per-rank clocks of one prediction, advanced step by step (the rules of the module
    docstring). Single-port steps go through the compiled fast path when their messages allow;
    with a ``recorder`` (a timeline, one size) every step takes the general path, whose round
    kernel does the fast path's arithmetic, and its messages are recorded round by round."""

    def __init__(
        self,
        model: Hockney,
        schedule: Schedule,
        sizes: np.ndarray,
        recorder: Recorder | None = None,
    ) -> None:
        nsizes = len(sizes)
        # one clock per (rank, link): virtual rank r·L + c mod L (commsim._messages.port_ranks)
        self.links = min(model.links, schedule.nchannels)
        p = schedule.nranks * self.links
        per_unit = sizes / schedule.nbytes_units  # bytes per slot unit, one per size
        self.model, self.schedule, self.p = model, schedule, p
        self.alpha, self.ports = model.alpha, model._k(p)
        self.piecewise, self.per_unit = model.piecewise, per_unit
        self.reduction = model.reduction
        # a measured message or reduction time: one array expression per round (numpy path);
        # with a measured reduction only, the steps that reduce nothing keep the fast paths
        self.curved = self.piecewise is not None or self.reduction is not None
        self.bw, self.gw = model.beta * per_unit, model.gamma * per_unit
        self.clock = np.zeros((p, nsizes))
        self.step_time = np.zeros((schedule.nsteps, nsizes))
        self.last = np.zeros(nsizes)  # running max of participants' clocks
        self.tmp = np.empty((2 * max(schedule.max_step_transfers_hint or p, 1), nsizes))
        self.seen_s = np.zeros(p, dtype=np.int64)
        self.seen_d = np.zeros(p, dtype=np.int64)
        self.unit = int(schedule.slot_units[0]) if schedule.uniform_slots else 0
        # the one-size kernel takes contiguous 1-D views and scalars, made once
        self.one = nsizes == 1
        self.clock1, self.tmp1 = self.clock.reshape(-1), self.tmp.reshape(-1)
        self.old = np.empty(p if self.one else 0)  # the one-size kernel's copy of the clocks
        self.bw0, self.gw0 = float(self.bw[0]), float(self.gw[0])
        # small work: the array kernels (same bits), not numba's start-up (_numpy_kernels)
        ntransfers = schedule.ntransfers_hint
        if ntransfers is None:
            ntransfers = schedule.nsteps * (schedule.max_step_transfers_hint or schedule.nranks)
        self.nslots = schedule.nslots
        self._work = (ntransfers, nsizes)  # which kernels: chosen when a step first needs them
        self._kernels: Any = None
        self.recorder, self.i = recorder, 0
        self.fast = self.ports == 1 and self.piecewise is None and recorder is None
        # many sizes: each distinct clock vector once (bit for bit the dense clocks), until a
        # step needs the general path or sharing does not pay
        self.share = (
            self.fast and nsizes > 1 and ntransfers * nsizes > _numpy_kernels.NUMPY_MAX_WORK
        )
        self.shared: SharedClocks | None = None
        # level clocks: while every rank's clock is one vector, uniform steps move it at once
        self.level: np.ndarray | None = np.zeros(nsizes) if self.fast and self.LEVEL else None
        self.level_steps = 0  # steps the level clocks took (tests and benchmarks read it)
        # read-only arrays already checked: a permutation pair (src, dst), and a count and
        # reduce array with one value each (count, reduce, that count, that flag)
        self._perm: tuple[np.ndarray, np.ndarray] | None = None
        self._flat: tuple[np.ndarray, np.ndarray, int, bool] | None = None
        if self.level is None and self.share:
            self.shared = SharedClocks(p, nsizes, schedule.max_step_transfers_hint or p)

    @property
    def kernels(self) -> Any:
        """The array kernels for small work, the compiled ones (numba, imported now) above."""
        if self._kernels is None:
            self._kernels = _numpy_kernels.choose(*self._work)
        return self._kernels

    #: whether uniform steps on level clocks take the shortcut (tests turn it off to compare)
    LEVEL = True

    def _uniform(self, i: int, st: Step, gw: np.ndarray | None = None) -> bool:
        """One uniform step on level clocks: ``True`` when ``st`` is one (see the module
        docstring), the level then moved; ``False`` with nothing touched otherwise. ``gw``:
        seconds per reduced unit, per size (default γ's; a measured reduction's, for this
        step's message size).

        Shared or read-only arrays seen before (a ring's ranks, counts and flags) are not
        checked again: only the step's slot ranges are, two array reductions each, and
        then the level moves without a compiled kernel (so without numba's start-up)."""
        gw = self.gw if gw is None else gw
        level = self.level
        assert level is not None
        perm, flat = self._perm, self._flat
        known = perm is not None and st.src is perm[0] and st.dst is perm[1]
        if known and flat is not None and st.count is flat[0] and st.reduce is flat[1]:
            c, red = flat[2], flat[3]
            if (
                self.unit > 0
                and _in_bounds(st.src_slot, c, self.nslots)
                and (st.dst_slot is st.src_slot or _in_bounds(st.dst_slot, c, self.nslots))
            ):
                _numpy_kernels.level_step(
                    level, self.alpha, c * self.unit, self.bw, gw, red, self.last
                )
                self.level_steps += 1
                return True
        frozen = all(map(_read_only, (st.src, st.dst, st.count, st.reduce)))
        kernels = _numpy_kernels if frozen else self.kernels  # checked once: no numba for it
        if not kernels.uniform_step(
            st.src, st.dst, st.src_slot, st.dst_slot, st.count, st.reduce,
            self.schedule.slot_offsets, self.unit, self.p, self.seen_s, self.seen_d, -(i + 1),
            known, level, self.alpha, self.bw, gw, self.last,
        ):  # fmt: skip
            return False
        if frozen:  # a uniform step: a permutation pair, one count, one flag
            self._perm = (st.src, st.dst)
            self._flat = (st.count, st.reduce, int(st.count[0]), bool(st.reduce[0]))
        self.level_steps += 1
        return True

    def _shift_classes(self, st: Step) -> bool:
        """A step of whole shift classes on level clocks (an all-to-all round of messages):
        ``True`` when ``st`` is one, the level then moved class by class, as the general path's
        rounds would move every clock; ``False`` with nothing touched otherwise."""
        if len(st.src) < 2 * self.p:  # one class at most: a uniform step or not this shape
            return False
        if not self.kernels.shift_classes_step(
            st.src, st.dst, st.src_slot, st.dst_slot, st.count, st.reduce,
            self.schedule.slot_offsets, self.unit, self.p, self.level, self.alpha, self.bw,
            self.gw, self.last,
        ):  # fmt: skip
            return False
        self.level_steps += 1
        return True

    def _leave_level(self) -> None:
        """From level clocks to per-rank clocks (shared or dense) that all hold the level."""
        level, self.level = self.level, None
        if level is None:
            return
        if self.share:
            self.shared = SharedClocks(
                self.p, len(level), self.schedule.max_step_transfers_hint or self.p, start=level
            )
        else:
            self.clock[:] = level

    def _dense(self) -> None:
        """Leave the level or shared clocks for the dense ``[p, sizes]`` table (same numbers)."""
        if self.level is not None:
            self.clock[:] = self.level
            self.level = None
        if self.shared is not None:
            self.clock[:] = self.shared.dense()
            self.shared = None

    def rank_clock(self) -> np.ndarray:
        """``[p, sizes]``: each rank's clock, the latest of its links'."""
        self._dense()
        if self.links == 1:
            return self.clock
        return self.clock.reshape(self.schedule.nranks, self.links, -1).max(axis=1)

    def step(self, i: int, st: Step) -> None:
        self.i = i
        if len(st.src) and not (self.fast and self._fast(i, self._on_links(i, st))):
            if not remembered(self.schedule, i, self.links):  # else checked when first seen
                self.schedule.check_step(st, i)  # the general path: names a malformed step
            self._general(st)
        self.step_time[i] = self.last

    def _on_links(self, i: int, st: Step) -> Step:
        """``st`` with each rank renamed to its virtual rank ``r·L + c mod L``."""
        if self.links == 1:
            return st
        ch = st.channel
        if len(ch) and (ch.min() < 0 or ch.max() >= self.schedule.nchannels):
            self.schedule.check_step(st, i)  # names the transfer with a bad channel
        port = ch % self.links
        return st._replace(src=st.src * self.links + port, dst=st.dst * self.links + port)

    def _fast(self, i: int, st: Step) -> bool:
        """The compiled single-port step; ``False`` when its messages need the general path
        (with a measured reduction, every step that reduces)."""
        if self.reduction is not None and st.reduce.any():
            # a uniform step on level clocks at its message size's measured rate; any
            # other step that reduces takes the general path
            gw = self._step_gw(st) if self.level is not None else None
            return gw is not None and self._uniform(i, st, gw)
        if self.level is not None:
            if self._uniform(i, st) or (self.links == 1 and self._shift_classes(st)):
                return True
            self._leave_level()
        if 2 * len(st.src) > len(self.tmp):
            self.tmp = np.empty((2 * len(st.src), self.clock.shape[1]))
            self.tmp1 = self.tmp.reshape(-1)
        offsets = self.schedule.slot_offsets
        if self.shared is not None:
            done = self.shared.step(
                st, offsets, self.unit, self.alpha, self.bw, self.gw, self.seen_s, self.seen_d,
                i + 1, self.last,
            )  # fmt: skip
            if done == 1:
                return True
            self._dense()  # the general path, or dense clocks from here on
            if done == 0:
                return False
        if self.one:  # one size: the kernel without the loop over sizes
            return self.kernels.fast_single_port_step_1d(
                self.clock1, st.src, st.dst, st.src_slot, st.dst_slot, st.count, st.reduce,
                offsets, self.unit, self.alpha, self.bw0, self.gw0, self.old, self.seen_s,
                self.seen_d, i + 1, self.last,
            )  # fmt: skip
        return self.kernels.fast_single_port_step(
            self.clock, st.src, st.dst, st.src_slot, st.dst_slot, st.count, st.reduce, offsets,
            self.alpha, self.bw, self.gw, self.tmp, self.seen_s, self.seen_d, i + 1, self.last,
        )  # fmt: skip

    def _general(self, st: Step) -> None:
        """Messages, their rounds (k at a time with k ports), local reductions, the step's end."""
        self._dense()
        msg, rounds = port_messages(st, self.schedule, self.links, self.i)
        for j in range(0, len(rounds), self.ports):
            if self.ports == 1:
                idx = rounds[j]
                src, dst = msg.src[idx], msg.dst[idx]
                self._single_round(src, dst, msg.units[idx], msg.reduce_units[idx])
            else:
                self._shared_round(msg, np.concatenate(rounds[j : j + self.ports]))
        if len(msg.local_rank):
            red = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=self.p)
            before = self.clock.copy() if self.recorder is not None else None
            self.clock += self._reduce(red, local=True)
            if before is not None and self.recorder is not None:
                busy = np.flatnonzero(red > 0)
                self.recorder.local(busy, before[busy, 0], self.clock[busy, 0])
            self.last = np.maximum(self.last, self.clock[msg.local_rank].max(axis=0))
        self.kernels.participants_max(self.clock, msg.src, msg.dst, self.last)

    def _single_round(
        self, src: np.ndarray, dst: np.ndarray, units: np.ndarray, red: np.ndarray
    ) -> None:
        clock, recorder = self.clock, self.recorder
        if self.curved:  # t(b) or r(b) per message: one array expression per round
            start = np.maximum(clock[src], clock[dst])
            end = start + self._time(units)
            clock[src] = np.maximum(clock[src], end)  # a matching: no rank twice on one side
            clock[dst] = np.maximum(clock[dst], end + self._reduce(red))
        else:
            start = np.maximum(clock[src], clock[dst]) if recorder is not None else clock[:0]
            if len(src) > len(self.tmp):
                self.tmp = np.empty((len(src), self.clock.shape[1]))
                self.tmp1 = self.tmp.reshape(-1)
            self.kernels.single_port_round(
                clock, src, dst, units, red, self.alpha, self.bw, self.gw, self.tmp
            )
            end = self.tmp[: len(src)]
        if recorder is not None:
            # the receiver's clock is now its reduction end: it was at most the start
            recorder.messages(self.i, src, dst, start[:, 0], end[:, 0], clock[dst, 0])

    def _time(self, units: np.ndarray) -> np.ndarray:
        """``[messages, sizes]`` transfer times of messages of ``units`` slot units each."""
        if self.piecewise is not None:
            return self._measured(self.piecewise, units)
        return self.alpha + np.multiply.outer(units, self.bw)

    def _measured(self, curve: Any, units: np.ndarray) -> np.ndarray:
        """``[n, sizes]``: ``curve`` at ``units`` slot units each, evaluated once per distinct
        count (a round's messages mostly have one), then spread back to the messages."""
        distinct, which = np.unique(units, return_inverse=True)
        return curve(np.multiply.outer(distinct, self.per_unit))[which.reshape(-1)]

    def _step_gw(self, st: Step) -> np.ndarray | None:
        """Seconds per reduced unit, per size, of the measured reduction at the size of
        ``st``'s first message (what a uniform step's messages all reduce), or ``None`` where
        the step cannot be uniform on level clocks (no uniform slots, no messages)."""
        if self.unit == 0 or not len(st.count) or int(st.count[0]) <= 0:
            return None
        u = int(st.count[0]) * self.unit
        return self._reduce(np.array([u]))[0] / u

    def _reduce(self, units: np.ndarray, local: bool = False) -> np.ndarray:
        r"""``[n, sizes]`` times to reduce ``units`` slot units each: :math:`b\gamma`, or the
        measured :math:`r(b)` after a message (``local``: the reduction alone); 0 where
        nothing is reduced."""
        curve = self.reduction.alone if local and self.reduction is not None else self.reduction
        if curve is None:
            return np.multiply.outer(units, self.gw)
        out = np.zeros((len(units), len(self.per_unit)))
        has = units > 0
        if has.any():  # and no charge at a size of 0 bytes (per_unit 0)
            out[has] = np.where(self.per_unit > 0, self._measured(curve, units[has]), 0.0)
        return out

    def _shared_round(self, msg: Any, idx: np.ndarray) -> None:
        """Messages ``idx`` in flight together; each rank's sends (receives) share its link."""
        p, clock = self.p, self.clock
        src, dst, units = msg.src[idx], msg.dst[idx], msg.units[idx]
        sent = np.bincount(src, units, minlength=p)
        received = np.bincount(dst, units, minlength=p)
        busy = np.maximum(sent[src], received[dst])  # units through the busier end's link
        start = np.maximum(clock[src], clock[dst])
        end = start + self._time(busy)
        new = clock.copy()
        np.maximum.at(new, src, end)
        np.maximum.at(new, dst, end)
        red = np.bincount(dst, msg.reduce_units[idx], minlength=p)
        has = red > 0
        new[has] += self._reduce(red[has])
        clock[:] = new
