r"""The JAX twin of a model: predicted time as a pure, differentiable function of the parameters.

For a fixed schedule, placement and routes, :class:`Twin` replays the clock updates the compiled
model makes (:mod:`commsim.models._twin_program` records them once) as a ``jax.lax.scan`` over
rounds, so the time

.. math::

    T(\theta, n) = \max_r c_r \quad\text{after every round's}\quad
    c_q, c_d \leftarrow \max\bigl(c_\cdot,\; \max(c_q, c_d) + \ell_m(\theta) + b_m(n)\,\beta_m(\theta)
    \bigr)

is a function of the parameters :math:`\theta` that ``jax.jit`` compiles, ``jax.vmap`` maps over
thousands of what-if clusters and sizes, and ``jax.grad`` differentiates (sensitivities). It equals
the compiled model's number to rounding (a test sweeps the registry).

Parameters (a dict, a pytree; :meth:`Twin.params` gives the model's own values):

* from :class:`~commsim.models.Hockney`: ``alpha`` (s), ``beta`` (s/B), ``gamma`` (s/B);
* from :class:`~commsim.models.Topology` (``"none"`` or ``"bottleneck"`` contention):
  ``latency`` and ``inv_bandwidth``, one **multiplier** per link class (1 is the network as
  given; 0.5 halves the class's latency, or doubles its bandwidth), ``gamma`` (s/B),
  ``overhead`` (s) and ``launch`` (s, the collective library's per-call cost). A model that
  overlaps reductions with transfers (a GPU preset's ``reduction_overlap``) is replayed with
  that rule; a protocol or a per-channel cap is refused for now.

The time is piecewise linear in these (a max of sums), hence differentiable almost everywhere;
``jax.grad`` returns the gradient of the active piece (the critical path's). ``"maxmin"`` and
``"flow"`` contention are not replayed: their rates depend on the order of events, and the twin
refuses them (finite differences of the compiled model are the way there).

Compression (exact; :attr:`Twin.replayed`): when the program is invariant under a shift of its
ports (a ring on identical servers, every rank of a Hockney schedule), the replay runs one port
per orbit (:mod:`commsim.models._twin_orbits`): every other port's clock is bitwise its
representative's, so the time and the gradient are the full replay's. A program without such a
symmetry (a straggler, a skewed start) is replayed on every port. :meth:`Twin.sweep` runs the
parameter sets as the innermost axis of every array (:mod:`commsim.models._twin_batch`), so a
round's gathers move contiguous rows; on a folded program of few ports it applies each run of
identical rounds as a max-plus matrix power (:mod:`commsim.models._twin_runs`; equal to the
replay to rounding, 1e-9 tested).

Homogeneity: :math:`T(s\theta) = s\,T(\theta)` for latencies, inverse bandwidths, γ and overhead
together (with no start skew), so the elasticities :math:`\partial \log T / \partial \log \theta_i`
sum to 1 (Euler's theorem): :meth:`Twin.elasticities` returns them.

References:
    R. Hockney, "The communication challenge for MPP", Parallel Computing 20 (1994).
    JAX: ``jax.lax.scan``, ``jax.vmap``, ``jax.grad`` (https://docs.jax.dev).

See Also:
    :class:`commsim.models.Hockney`, :class:`commsim.models.Topology`: the models it mirrors.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.models._inputs import as_schedule, as_sizes
from commsim.models._twin_batch import replay_many
from commsim.models._twin_orbits import fold
from commsim.models._twin_program import Program, hockney_program, topology_program
from commsim.models._twin_runs import replay_runs, runs
from commsim.models.hockney import Hockney
from commsim.models.topology import Topology

__all__ = ["Twin"]


class Twin:
    """A model's time for one schedule as a pure JAX function of its parameters.

    Build it with :meth:`of`; call :meth:`time` (jit-compiled, vmappable, differentiable) with
    a parameter dict and a size in bytes. JAX runs in double precision inside the twin's calls
    (``jax.enable_x64``), so the numbers match the compiled model's; to ``jax.vmap`` or
    ``jax.grad`` :meth:`time` yourself, do it inside ``with jax.enable_x64(True):`` (or set
    ``jax_enable_x64``), else JAX hands the twin float32 inputs.

    Examples:
        >>> import commsim
        >>> from commsim.models import Hockney
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> twin = Twin.of(Hockney(alpha=1e-6, beta=1e-9, gamma=0.0), s)
        >>> round(float(twin.time(twin.params(), 4000.0)) * 1e6, 6)  # 2·3·1us + 2·(3/4)·4000·1ns
        12.0
        >>> g = twin.grad(twin.params(), 4000.0)
        >>> round(g["alpha"], 6), round(g["beta"], 3)  # 6 latencies; 6000 bytes on the path
        (6.0, 6000.0)
    """

    def __init__(
        self, program: Program, kind: str, defaults: dict[str, Any], *, compress: bool = True
    ) -> None:
        self.program, self.kind, self._defaults = program, kind, defaults
        #: the program the replay runs: ``program`` folded onto its orbits when it has a port
        #: symmetry (:mod:`commsim.models._twin_orbits`; exact), else ``program`` itself
        self.replayed = (fold(program) if compress else None) or program
        self._runs = runs(self.replayed) if compress else None  # sweep: matrix powers
        with jax.enable_x64(True):
            self._consts = _constants(self.replayed)

    @classmethod
    def of(cls, model: Any, schedule: Schedule, *, compress: bool = True) -> Twin:
        """The twin of ``model`` (a single-port :class:`Hockney` with any ``links``, or a
        :class:`Topology` under ``"none"``/``"bottleneck"``) timing ``schedule``;
        ``compress=False`` replays every port even where the program has a symmetry (the
        reference the compressed replay is tested against)."""
        schedule = as_schedule(schedule)
        if isinstance(model, Hockney):
            measured = model.message is not None or model.reduction is not None
            if model.ports != "single" or measured:
                raise ParameterError(
                    "the twin replays single-port Hockney with alpha, beta and gamma (links "
                    f"allowed), not ports={model.ports!r}, a measured message curve or a "
                    "measured reduction in a step"
                )
            program = hockney_program(schedule, links=model.links)
            defaults = {"alpha": model.alpha, "beta": model.beta, "gamma": model.gamma}
            return cls(program, "hockney", defaults, compress=compress)
        if isinstance(model, Topology):
            program = topology_program(model, schedule)
            n = len(program.classes)
            defaults = {
                "latency": np.ones(n),
                "inv_bandwidth": np.ones(n),
                "gamma": model.gamma,
                "overhead": model.overhead,
                "launch": model.call_cost,
            }
            return cls(program, "topology", defaults, compress=compress)
        raise ParameterError(
            f"the twin mirrors Hockney and Topology models, not {type(model).__name__}"
        )

    @property
    def classes(self) -> tuple[str, ...]:
        """The link classes the ``latency`` and ``inv_bandwidth`` multipliers index."""
        return self.program.classes

    def params(self) -> dict[str, Any]:
        """The model's own parameters (a fresh dict of numpy float64 values: edit them freely;
        JAX arrays made outside ``jax.enable_x64`` would be float32)."""
        return {k: np.array(v, dtype=np.float64) for k, v in self._defaults.items()}

    def time(self, params: dict[str, Any], nbytes: Any) -> jax.Array:
        """Predicted time (s) for ``params`` and a size ``nbytes`` (bytes; jit-compiled; wrap in
        ``jax.vmap`` for many parameter sets or sizes)."""
        with jax.enable_x64(True):
            return _time(self._consts, params, jnp.asarray(nbytes, dtype=jnp.float64), self.kind)

    def times(self, params: dict[str, Any], nbytes: Any) -> np.ndarray:
        """Predicted times (s) for every size of ``nbytes`` (a number, an array or a size string
        such as ``"1KiB..1GiB"``), in one vmapped call."""
        sizes, _ = as_sizes(nbytes)
        with jax.enable_x64(True):
            run = jax.vmap(lambda n: _time(self._consts, params, n, self.kind))
            return np.asarray(run(jnp.asarray(sizes)))

    def sweep(self, params: dict[str, Any], nbytes: float) -> np.ndarray:
        """Times (s) of ``N`` parameter sets at one size, in one compiled, vmapped call: every
        entry of ``params`` has a leading axis of length ``N`` (``np.broadcast_to`` the ones
        that do not vary)."""
        lengths = {np.shape(v)[0] if np.ndim(v) else None for v in params.values()}
        if len(lengths) != 1 or None in lengths:
            raise ParameterError(
                "sweep: every parameter needs the same leading axis (one entry per set)"
            )
        with jax.enable_x64(True):
            batch = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()}
            n = jnp.asarray(nbytes, dtype=jnp.float64)
            if self._runs is not None:
                return np.asarray(_sweep_runs(self._consts, batch, n, self.kind, self._runs))
            return np.asarray(_sweep(self._consts, batch, n, self.kind))

    def grad(self, params: dict[str, Any], nbytes: Any) -> dict[str, Any]:
        """``d time / d params`` (same structure as ``params``), as Python floats and arrays."""
        with jax.enable_x64(True):
            g = _grad(self._consts, params, jnp.asarray(nbytes, dtype=jnp.float64), self.kind)
        return {k: float(v) if np.ndim(v) == 0 else np.asarray(v) for k, v in g.items()}

    def elasticities(self, nbytes: Any) -> dict[str, Any]:
        r""":math:`\partial \log T / \partial \log \theta_i` at the model's own parameters, for
        each size of ``nbytes`` (a number, an array or a size string): ``{name: [sizes]}`` or
        ``{name: [sizes, classes]}``."""
        sizes, _ = as_sizes(nbytes)
        p = self.params()
        with jax.enable_x64(True):
            sz = jnp.asarray(sizes)
            t = jax.vmap(lambda n: _time(self._consts, p, n, self.kind))(sz)
            g = jax.vmap(lambda n: _grad(self._consts, p, n, self.kind))(sz)
        out = {}
        for k, v in g.items():
            theta = np.asarray(p[k])
            tt = np.asarray(t).reshape((-1,) + (1,) * theta.ndim)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[k] = np.where(tt > 0, np.asarray(v) * theta / tt, 0.0)
        return out


def _replay(c: dict[str, jax.Array], params: dict[str, Any], nbytes: jax.Array, kind: str):
    """The clocks of the program ``c`` under ``params`` at size ``nbytes``; the latest is the
    time. A ``lax.scan`` over rounds: each round's messages read the clocks before any write."""
    per_unit = nbytes * c["units_per_byte"]
    if kind == "hockney":
        lat_x = jnp.reshape(params["alpha"], (1,))
        bw_x = jnp.reshape(params["beta"], (1,))
        overhead = launch = 0.0
    else:
        lat_x, bw_x, overhead = params["latency"], params["inv_bandwidth"], params["overhead"]
        launch = params["launch"]
    gamma = params["gamma"]
    # per pattern: latency and inverse rate per message, from the class multipliers
    lat = c["lat"] @ lat_x + overhead  # [patterns, width]
    inv = jnp.max(c["share"] * bw_x[c["hop_class"]], axis=-1)  # [patterns, width]

    never = jnp.full(1, -jnp.inf)

    def round_(clock: jax.Array, xs: tuple) -> tuple[jax.Array, None]:
        src, dst, units, red, local, k, f, fd, sent, received = xs
        transfer = units * per_unit * inv[k] * f
        e = jnp.maximum(clock[src], clock[dst]) + lat[k] + transfer
        reduce_time = red * per_unit * gamma * fd
        exposed = jnp.where(c["overlap"], jnp.maximum(reduce_time - transfer, 0.0), reduce_time)
        # a round is a matching: each port sends at most one message and receives at most one,
        # so its new clock is a gather (``sent``/``received`` point past the end for none)
        out = jnp.concatenate([e, never])[sent]
        into = jnp.concatenate([e + exposed, never])[received]
        msg = jnp.maximum(clock, jnp.maximum(out, into))
        add = clock + jnp.concatenate([reduce_time, jnp.zeros(1)])[sent]
        return jnp.where(local, add, msg), None

    start = jnp.concatenate([c["start"] + launch, jnp.zeros(1)])
    xs = (
        c["src"], c["dst"], c["units"], c["red"], c["local"], c["pattern"], c["slow_msg"],
        c["slow_dst"], c["sent"], c["received"],
    )  # fmt: skip
    clock, _ = jax.lax.scan(round_, start, xs)
    return jnp.max(clock[:-1])


_time = jax.jit(_replay, static_argnames="kind")
_grad = jax.jit(jax.grad(_replay, argnums=1), static_argnames="kind")
_sweep = jax.jit(replay_many, static_argnames="kind")
_sweep_runs = jax.jit(replay_runs, static_argnames=("kind", "segments"))


def _constants(program: Program) -> dict[str, jax.Array]:
    """The program's arrays on the device, padding's ``-1`` receivers sent to the dummy clock."""
    dst = np.where(program.dst < 0, program.nports, program.dst)
    return {
        "src": jnp.asarray(program.src),
        "dst": jnp.asarray(dst),
        "units": jnp.asarray(program.units),
        "red": jnp.asarray(program.red),
        "local": jnp.asarray(program.local),
        "pattern": jnp.asarray(program.pattern),
        "slow_msg": jnp.asarray(program.slow_msg),
        "slow_dst": jnp.asarray(program.slow_dst),
        "sent": jnp.asarray(program.sent),
        "received": jnp.asarray(program.received),
        "lat": jnp.asarray(program.lat),
        "share": jnp.asarray(program.share),
        "hop_class": jnp.asarray(program.hop_class),
        "start": jnp.asarray(program.start, dtype=jnp.float64),
        "units_per_byte": jnp.asarray(program.units_per_byte, dtype=jnp.float64),
        "overlap": jnp.asarray(program.overlap),
    }
