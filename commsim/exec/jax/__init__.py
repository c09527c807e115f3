"""The JAX mesh backend: a schedule as one jitted ``shard_map`` with a ``ppermute`` per round.

:func:`plan` lowers a schedule with numpy alone (:mod:`commsim.exec.jax._plan`);
:class:`JaxMeshBackend` validates, plans, builds the device program
(:mod:`commsim.exec.jax._program`) and runs JAX's own collectives beside it
(:mod:`commsim.exec.jax._backend`). Rank ``r`` is device ``r`` of a mesh along :data:`AXIS`.
:func:`collective` runs a schedule inside the caller's own ``shard_map`` on any pytree
(:mod:`commsim.exec.jax._dropin`); :func:`compiler_options` are the XLA options that let it run
in place.
"""

from commsim._compat import compiler_options
from commsim.exec.jax._backend import AXIS, DTYPES, JaxMeshBackend
from commsim.exec.jax._dropin import JaxCollective, collective
from commsim.exec.jax._plan import Plan, plan

__all__ = [
    "AXIS",
    "DTYPES",
    "JaxCollective",
    "JaxMeshBackend",
    "Plan",
    "collective",
    "compiler_options",
    "plan",
]
