r"""Repeated rounds as max-plus matrix powers: a ring's 2,046 rounds in a few dozen products.

A round of the twin's replay maps the clocks :math:`c` (ports plus the dummy) to

.. math::

    c'_i = \max_j \bigl(M_{ij} + c_j\bigr) = (M \otimes c)_i,

a max-plus matrix product: :math:`M_{ii} = 0` (a clock never goes back), and a message
:math:`q \to d` costing :math:`e_m` (latency plus transfer) with exposed reduction :math:`x_m`
sets :math:`M_{qq}, M_{qd} \mathrel{\max=} e_m` and :math:`M_{dq}, M_{dd} \mathrel{\max=}
e_m + x_m`; a round of local reductions is the diagonal of their times. A run of :math:`k`
identical rounds (a ring's reduce-scatter, then its allgather) is :math:`M^{\otimes k} \otimes
c`, which binary exponentiation computes with :math:`\lfloor \log_2 k \rfloor` squarings and at
most as many products with the clock vector: :math:`O(P^3 \log k)` instead of :math:`O(k\,W)`
for :math:`P` ports and :math:`W` messages per round, worth it on a folded program
(:mod:`commsim.models._twin_orbits`), never on 1,024 ports.

Exactness: :math:`\otimes` is associative, so :math:`M^{\otimes k} \otimes c` is the replay's
value in exact arithmetic; in floating point its sums are grouped differently (relative
differences of a few units in the last place per product, tested against the replay to 1e-9).
Only :meth:`~commsim.models.twin.Twin.sweep` uses it (times, no gradients: a maximum's
gradient among tied paths would be shared differently).

See Also:
    :mod:`commsim.models._twin_batch`: the round-by-round replay it shortcuts.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from commsim.models._twin_batch import coefficients
from commsim.models._twin_program import Program

__all__ = ["MAX_RUNS", "MAX_RUN_PORTS", "replay_runs", "runs"]

#: Clocks (ports plus the dummy) up to which matrix powers may pay: a product is P³ per set.
MAX_RUN_PORTS = 33
#: Runs compiled one after another (the replay is unrolled over them).
MAX_RUNS = 16


def runs(program: Program) -> tuple[tuple[int, int], ...] | None:
    """``((first round, length), ...)`` of the runs of identical message rounds of ``program``
    (padding rounds left out), or ``None`` when matrix powers would not pay (too many ports,
    too many runs, or runs too short)."""
    P = program.nports + 1
    live = (program.src < program.nports).any(axis=1)
    if P > MAX_RUN_PORTS or not live.any():
        return None
    arrays = (
        program.src, program.dst, program.units, program.red, program.local, program.pattern,
        program.slow_msg, program.slow_dst, program.sent, program.received,
    )  # fmt: skip
    same = np.ones(len(live) - 1, dtype=bool)
    for a in arrays:
        same &= (a[1:] == a[:-1]).reshape(len(same), -1).all(axis=1)
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    lengths = np.diff(np.append(starts, len(live)))
    keep = live[starts]
    out = tuple(zip(starts[keep].tolist(), lengths[keep].tolist(), strict=True))
    width = program.src.shape[1]
    scan = int(live.sum()) * (P + width) * 8
    powers = sum(P**3 * k.bit_length() + P * P * k.bit_count() for _, k in out)
    return out if len(out) <= MAX_RUNS and 2 * powers < scan else None


def _matrix(c: dict[str, jax.Array], r: int, per_unit, lat, inv, gamma) -> jax.Array:
    """``[P, P, N]``: round ``r``'s max-plus matrix for every parameter set."""
    P, n = c["sent"].shape[1], gamma.shape[0]
    src, dst, k = c["src"][r], c["dst"][r], c["pattern"][r]
    transfer = (c["units"][r] * per_unit)[:, None] * inv[k] * c["slow_msg"][r][:, None]
    e = lat[k] + transfer
    reduce_time = (c["red"][r] * per_unit)[:, None] * gamma[None, :] * c["slow_dst"][r][:, None]
    exposed = jnp.where(c["overlap"], jnp.maximum(reduce_time - transfer, 0.0), reduce_time)
    eye = jnp.where(jnp.eye(P, dtype=bool)[..., None], 0.0, -jnp.inf) * jnp.ones(n)
    real = (src < P - 1)[:, None]
    on_diag = eye.at[src, src].set(jnp.where(real, reduce_time, 0.0))
    e, into = jnp.where(real, e, -jnp.inf), jnp.where(real, e + exposed, -jnp.inf)
    rows = jnp.concatenate([src, src, dst, dst])
    cols = jnp.concatenate([src, dst, src, dst])
    msg = eye.at[rows, cols].max(jnp.concatenate([e, e, into, into]))
    return jnp.where(c["local"][r], on_diag, msg)


def _product(a: jax.Array, b: jax.Array) -> jax.Array:
    """Max-plus ``a ⊗ b`` of ``[P, P, N]`` matrices (or ``[P, P, N] ⊗ [P, N]``)."""
    if b.ndim == 2:
        return jnp.max(a + b[None, :, :], axis=1)

    def term(m: jax.Array, acc: jax.Array) -> jax.Array:
        column = jax.lax.dynamic_slice_in_dim(a, m, 1, axis=1)  # [P, 1, N]
        row = jax.lax.dynamic_slice_in_dim(b, m, 1, axis=0)  # [1, P, N]
        return jnp.maximum(acc, column + row)

    return jax.lax.fori_loop(0, a.shape[1], term, jnp.full(a.shape, -jnp.inf))


def replay_runs(
    c: dict[str, jax.Array], params: dict[str, Any], nbytes: jax.Array, kind: str, segments
) -> jax.Array:
    """The time of the program ``c`` for every parameter set of ``params`` (leading axis
    ``N``) at size ``nbytes``, each run of ``segments`` (from :func:`runs`) a matrix power."""
    per_unit = nbytes * c["units_per_byte"]
    lat, inv, gamma, launch = coefficients(c, params, kind)
    clock = jnp.concatenate([c["start"][:, None] + launch[None, :], jnp.zeros((1, len(gamma)))])
    for r, k in segments:
        clock = _power(_matrix(c, r, per_unit, lat, inv, gamma), k, clock)
    return jnp.max(clock[:-1], axis=0)


def _power(m: jax.Array, k: int, clock: jax.Array) -> jax.Array:
    """``m^k ⊗ clock`` by binary exponentiation: one compiled loop over the bits of ``k``."""

    def bit(b: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        m, clock = state
        clock = jnp.where((k >> b) & 1, _product(m, clock), clock)
        return _product(m, m), clock

    bits = k.bit_length()
    m, clock = jax.lax.fori_loop(0, bits - 1, bit, (m, clock))
    return _product(m, clock)  # the top bit is always set
