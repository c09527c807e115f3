r"""A schedule as a collective inside the caller's own ``shard_map``: :func:`collective`.

The per-device body of the mesh backend (:func:`commsim.exec.jax._program.program`) is a
function of one device's ``[1, nelems]`` row that uses only ``lax.axis_index`` and
``lax.ppermute`` over a named axis, so it runs unchanged inside any ``shard_map`` (or other
named-axis map) of the caller's, over any of its mesh axes. This module wraps it for pytrees
(:class:`commsim.exec._dropin.TreeCollective`: grouping by dtype, buckets, packing, ``mean``).

Semantics, per leaf, equal JAX's own collectives on the same inputs:

================  ===============================================================================
allreduce         ``lax.psum(x, axis)``
reduce_scatter    ``lax.psum_scatter(x, axis, scatter_dimension=0, tiled=True)``
allgather         ``lax.all_gather(x, axis, axis=0, tiled=tiled)``
alltoall          ``lax.all_to_all(x, axis, 0, 0, tiled=True)``
broadcast         every device gets the root's ``x`` (the root is the schedule's)
reduce            the root gets ``lax.psum(x, axis)``; other devices' results are unspecified
================  ===============================================================================

Sums are reassociated: the schedule adds in its own order, so floating-point results differ
from ``psum``'s by rounding (integers are exact).

**Copies.** One array whose size the schedule's units divide is the schedule's buffer as it is
(a reshape); several leaves are packed with one ``concatenate`` and sliced out once
(:mod:`commsim.exec._packing`). The schedule then updates the buffer in place. Donate the input
to the caller's ``jit`` (``donate_argnums``) and compile with :func:`compiler_options` (region-
based copy insertion, what the mesh backend compiles with), and the compiled program holds no
copy of the buffer at all, like the backend's own; without donation XLA copies the input once
(``psum`` too writes a new array), and without the options a schedule whose steps have several
``ppermute`` rounds (e.g. ``direct``) costs a copy of the buffer per such step. The schedule
runs on the ``[nelems]`` buffer and returns it unreshaped: a 1-D leaf comes back as it went in,
and a reshape of the result after the call (``f(x)[None]``, or a leaf of several dimensions)
fuses into the last write, which XLA CPU then runs out of place, a copy more::

    step = jax.jit(train_step, donate_argnums=0)
    compiled = step.lower(grads).compile(compiler_options=compiler_options("cpu"))

**Sharp bits.** The result is typed *varying* over the axis (JAX cannot know that a schedule's
result is replicated), so return it through ``out_specs=P(axis)``, or pass ``check_vma=False``
to ``shard_map`` where ``out_specs=P()`` would follow a ``psum``.
"""

from __future__ import annotations

from typing import Any

from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.exec._dropin import TreeCollective, Tuner
from commsim.exec._layout import Layout
from commsim.exec.jax._backend import DTYPES, JaxMeshBackend
from commsim.exec.jax._plan import Plan, plan

__all__ = ["JaxCollective", "collective"]


class JaxCollective(TreeCollective):
    """A collective over mesh axis ``axis_name`` (see :func:`collective`)."""

    backend = "jax"
    dtypes = DTYPES

    def __init__(self, schedule: Schedule | str, axis_name: str, **options: Any) -> None:
        super().__init__(schedule, **options)
        self.axis_name = axis_name

    def _size(self) -> int:
        from jax import lax

        try:
            return int(lax.axis_size(self.axis_name))
        except NameError:
            raise ParameterError(
                f"call this {self.collective} inside a shard_map over mesh axis "
                f"{self.axis_name!r} (no such axis is bound here)"
            ) from None

    def _where(self) -> str:
        return f"mesh axis {self.axis_name!r}"

    def _rank(self) -> Any:
        from jax import lax

        return lax.axis_index(self.axis_name)

    def _plan(self, schedule: Schedule, lay: Layout) -> Plan:
        def make() -> Plan:
            pl = plan(schedule, lay)
            if pl.nppermutes > JaxMeshBackend.MAX_ROUNDS:
                raise ParameterError(
                    f"{schedule.collective} {schedule.algorithm!r} needs {pl.nppermutes:,} "
                    f"ppermute rounds, past the {JaxMeshBackend.MAX_ROUNDS:,} one JAX program "
                    "compiles in reasonable time; use fewer segments or steps"
                )
            return pl

        return self._cache.get(schedule, ("plan", lay.count), make)

    def _run(self, schedule: Schedule, lay: Layout, buf: Any) -> Any:
        from commsim.exec.jax._program import program

        body = program(self._plan(schedule, lay), self.axis_name, lambda: None, self.wire)
        return body(buf)  # [nelems] in, [nelems] out: no reshape (a copy of the buffer)


def collective(
    schedule: Schedule | str,
    axis_name: str,
    *,
    mean: bool = False,
    tiled: bool = False,
    bucket_bytes: int | str | None = None,
    tuner: Tuner | None = None,
    collective: str | None = None,
    compression: str | None = None,
    error_feedback: bool | None = None,
) -> JaxCollective:
    """``schedule`` as a function of a pytree, to call inside the caller's ``shard_map``.

    Call the result ``f(tree)`` inside a ``shard_map`` (under ``jit`` or not) whose mesh has axis
    ``axis_name`` of size ``schedule.nranks``; ``tree`` is any pytree of arrays (any shapes, the
    dtypes of :data:`commsim.exec.jax.DTYPES`). It returns the same structure with each leaf's
    result as JAX's own collective would give it (the table in
    :mod:`commsim.exec.jax._dropin`). The leaves of one dtype travel in one schedule call
    (copied once into the packed buffer, unless a single leaf needs no padding, and once out);
    leaves of different dtypes in one call each.

    Args:
        schedule: a :class:`commsim.Schedule`, or ``"auto"`` to ask ``tuner`` for a schedule
            per call, by the packed size in bytes (static under ``jit``).
        axis_name: the mesh axis the ranks are on.
        mean: divide a reduction's result by ``p`` (gradient averaging; floating dtypes only).
        tiled: allgather only: concatenate the gathered leaves along axis 0 (``True``) or stack
            them on a new leading axis of length ``p`` (``False``), as ``lax.all_gather``.
        bucket_bytes: pack leaves into buckets of at most this many bytes (an int or a size
            string such as ``"25MiB"``), one schedule call each; ``None``: one call per dtype.
        tuner: for ``"auto"``: a table with ``collective``, ``nranks`` and
            ``schedule(nbytes)`` (:func:`commsim.tune`).
        collective: the collective expected (checked against the schedule or the tuner).
        compression: send every message as ``"fp16"``, ``"bf16"`` or ``"int8"`` (per-chunk
            scale) and add in the leaf's dtype (reductions of float leaves;
            ``docs/compression.md``).
        error_feedback: keep the quantisation error of each call's input and add it to the
            next (default: on for int8). Under ``jit`` call ``f.feedback(tree, residual)``,
            which returns ``(result, residual)`` (:class:`commsim.exec._dropin.TreeCollective`).

    Examples:
        >>> import jax, numpy as np, commsim
        >>> from jax.sharding import PartitionSpec as P
        >>> p = len(jax.devices())
        >>> mesh = jax.make_mesh((p,), ("data",))
        >>> f = collective(commsim.build("allreduce", "ring", nranks=p), "data", mean=True)
        >>> step = jax.jit(
        ...     jax.shard_map(
        ...         lambda g: f({"w": g}), mesh=mesh, in_specs=P("data"), out_specs=P("data")
        ...     )
        ... )
        >>> x = jax.device_put(np.arange(p, dtype=np.float32), jax.NamedSharding(mesh, P("data")))
        >>> bool((step(x)["w"] == (p - 1) / 2).all())  # every device: the mean of 0 .. p-1
        True
    """
    return JaxCollective(
        schedule,
        axis_name,
        mean=mean,
        tiled=tiled,
        bucket_bytes=bucket_bytes,
        tuner=tuner,
        collective=collective,
        compression=compression,
        error_feedback=error_feedback,
    )
