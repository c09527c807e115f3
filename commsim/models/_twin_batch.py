r"""The twin's replay for many parameter sets at once, the sets the innermost axis.

:func:`commsim.models.twin.Twin.sweep` evaluates :math:`N` parameter sets at one size. Under
``jax.vmap`` of the one-set replay, every round's gathers of clocks (``clock[src]``) become
batched gathers over a ``[N, ports]`` array, one scattered element at a time. Here the clocks
are ``[ports + 1, N]``: a gather moves whole rows of :math:`N` contiguous numbers, and each
round's arithmetic is a handful of ``[width, N]`` array operations. The operations per clock
and set are those of :func:`commsim.models.twin._replay` (the same sums in the same order, the
same maxima), so the numbers are the same.

See Also:
    :mod:`commsim.models.twin`: the one-set replay and the program's arrays.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["coefficients", "replay_many"]


def coefficients(c: dict[str, jax.Array], params: dict[str, Any], kind: str):
    """Per pattern and message, for every set: latency ``[P, width, N]``, inverse rate
    ``[P, width, N]``; and γ, the launch cost ``[N]``."""
    if kind == "hockney":
        lat_x, bw_x = params["alpha"][:, None], params["beta"][:, None]
        overhead = launch = jnp.zeros_like(params["alpha"])
    else:
        lat_x, bw_x = params["latency"], params["inv_bandwidth"]
        overhead, launch = params["overhead"], params["launch"]
    lat = jnp.einsum("pwc,nc->pwn", c["lat"], lat_x) + overhead
    bw = bw_x.T  # [classes, N]
    hops = c["share"].shape[-1]
    inv = functools.reduce(
        jnp.maximum,
        (c["share"][:, :, h, None] * bw[c["hop_class"][:, :, h]] for h in range(hops)),
    )
    return lat, inv, params["gamma"], launch


def replay_many(c: dict[str, jax.Array], params: dict[str, Any], nbytes: jax.Array, kind: str):
    """The time of the program ``c`` for every parameter set of ``params`` (each entry with a
    leading axis of ``N`` sets) at size ``nbytes``: ``[N]``."""
    per_unit = nbytes * c["units_per_byte"]
    lat, inv, gamma, launch = coefficients(c, params, kind)
    n = gamma.shape[0]
    never = jnp.full((1, n), -jnp.inf)
    zero = jnp.zeros((1, n))

    def round_(clock: jax.Array, xs: tuple) -> tuple[jax.Array, None]:
        src, dst, units, red, local, k, f, fd, sent, received = xs
        transfer = (units * per_unit)[:, None] * inv[k] * f[:, None]
        e = jnp.maximum(clock[src], clock[dst]) + lat[k] + transfer
        reduce_time = (red * per_unit)[:, None] * gamma[None, :] * fd[:, None]
        exposed = jnp.where(c["overlap"], jnp.maximum(reduce_time - transfer, 0.0), reduce_time)
        out = jnp.concatenate([e, never])[sent]
        into = jnp.concatenate([e + exposed, never])[received]
        msg = jnp.maximum(clock, jnp.maximum(out, into))
        add = clock + jnp.concatenate([reduce_time, zero])[sent]
        return jnp.where(local, add, msg), None

    start = jnp.concatenate([c["start"][:, None] + launch[None, :], zero])
    xs = (
        c["src"], c["dst"], c["units"], c["red"], c["local"], c["pattern"], c["slow_msg"],
        c["slow_dst"], c["sent"], c["received"],
    )  # fmt: skip
    clock, _ = jax.lax.scan(round_, start, xs)
    return jnp.max(clock[:-1], axis=0)
