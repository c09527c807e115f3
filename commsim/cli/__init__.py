r"""The ``commsim`` command line: list, draw, verify, predict, compare, tune, run and export
collective algorithms.

Commands (``commsim COMMAND --help`` shows each one's options and examples)::

    commsim algorithms [-c COLLECTIVE] [-a ALGORITHM] [--json]
    commsim show       -c COLLECTIVE -a ALGORITHM -p P [-o diagram.png] [--json]
    commsim verify     -c COLLECTIVE [-a A1,A2,..] -p P[,P..] [--param k=v] [--root R] [--json]
    commsim verify     --file schedule.json|algo.xml
    commsim predict    -c COLLECTIVE -a ALGORITHM -p P [-s SIZES] [MODEL] [--trace t.json] [--json]
    commsim predict    --file schedule.json|algo.xml [-s SIZES] [MODEL] [--json]
    commsim compare    -c COLLECTIVE [-a A1,A2,..] -p P[,P..] [-s SIZES] [MODEL] [--tune] [--plot F]
    commsim tune       -c COLLECTIVE -p P [-s SIZES] [MODEL] [-o table.toml] [--json]
    commsim topology   NETWORK [--draw F] [--json]
    commsim calibrate  -p P [-o profile.toml] [--plot F] | --from-nccl-tests LOG --cluster C
    commsim validate   -c COLLECTIVE [-a A1,A2,..] -p P [-s SIZES] [MODEL] [--backend B] [--all]
    commsim run        -c COLLECTIVE -a ALGORITHM -p P [-s SIZES] [--backend B] [--trace t.json]
    commsim export     -c COLLECTIVE -a ALGORITHM -p P --format msccl|goal -o FILE
    commsim sparse     -p P [-s SIZES] --density D[,D..] [--distribution powerlaw] [--plot F]

Units. Sizes are bytes with an optional unit: ``B``, decimal ``KB MB GB`` (powers of 1000) or
binary ``KiB MiB GiB`` (powers of 1024), or bits ``Kb Mb Gb`` (``1Gb`` is 125,000,000 bytes, as
the bandwidths' ``Gb/s`` are bits); ``--sizes`` takes lists and ranges (``1KiB,64MiB``,
``1KiB..1GiB`` doubling, ``1KB..1GB:x10``, ``0..4KiB:+1KiB``), as ``-p`` does for rank counts
(``8,64,1024``, ``2..1024``). A size is the collective's ``nbytes`` as nccl-tests counts it: the
vector for allreduce/broadcast/reduce, the gathered output for allgather, the input for
reduce-scatter, the per-rank send buffer for alltoall. Times take ``s, ms, us, ns`` (a bare number
is seconds; ``--alpha`` refuses a bare number of a millisecond or more, a forgotten unit);
``--beta``/``--gamma`` take a bandwidth (``25GB/s``, ``200Gb/s``) or seconds per byte
(``4e-11s/B``).

Model defaults are :class:`commsim.models.Hockney`'s and describe a 200 Gb/s (HDR) InfiniBand
cluster: α = 2 µs per message (MPI latency through one switch), β = 1/(25 GB/s) (the link's byte
rate), γ = 1/(100 GB/s) (a reduction kernel streaming near memory bandwidth), single-port full
duplex.

Output: aligned tables by default; ``--json`` prints one JSON document on stdout with sizes in
bytes (``nbytes``), times in seconds (``*_s``), bandwidths in bytes/s (``*_Bps``) and ``null`` for
a number that is not finite. A progress bar goes to stderr for long runs (``--progress``).

Memory: before a schedule is iterated, its footprint is estimated (:mod:`commsim.cli.memory`)
against ``--memory-limit`` (default 75% of physical RAM). ``verify`` and ``predict`` refuse a
``p`` that would not fit; ``compare`` and ``tune`` skip that algorithm with a note; ``export``
refuses a file whose text would not fit (at least 100 bytes a transfer), ``run`` a size whose
buffers would not, before its backend starts. Every refusal is one line and exit 2, and costs
what its estimate costs, never the work refused (``tests/cli/test_refusals.py``, p = 65,536).

Exit status: 0 success; 1 a schedule failed verification or a run its check (a result, not a
usage error); 2 bad input (unknown name, unparsable value, malformed schedule file, a ``p`` that
would not fit in memory), reported as one ``commsim[ COMMAND]: error: ...`` line on stderr; 130
interrupted.

Layout. One module per command (:mod:`~commsim.cli.algorithms`, :mod:`~commsim.cli.verify`,
:mod:`~commsim.cli.predict`, :mod:`~commsim.cli.compare`, :mod:`~commsim.cli.validate`,
:mod:`~commsim.cli.run`), each with the same anatomy: ``HELP``, ``DESCRIPTION`` and ``EXAMPLES``;
a frozen request dataclass; ``add_arguments(parser)``; ``parse(args) -> request`` (the only code
that reads the argparse namespace, with the argument groups it uses); ``compute(request)`` (no
printing, no argparse); ``render(result, as_json) -> str``; ``main(args) -> int``. Shared parts:
:mod:`~commsim.cli.arguments` (parser, ``--sizes``, help epilogs), :mod:`~commsim.cli.schedules`
(``-c -a -p --param --root --file``), :mod:`~commsim.cli.model` (the model from ``--alpha``...),
:mod:`~commsim.cli.execution` (``--backend``, ``--iters``...), :mod:`~commsim.cli.memory`,
:mod:`~commsim.cli.output` (tables, JSON) and :mod:`~commsim.cli.plot`. Adding a command is one
module and one entry in :data:`~commsim.cli._main.COMMAND_HELP`. Nothing outside this package
imports it.

Start-up: ``commsim COMMAND`` imports that command's module only, and ``commsim --help`` none
(:mod:`commsim.cli._main`); :data:`COMMANDS`, the tuple of every command's module, is built when
it is first read.
"""

from typing import TYPE_CHECKING, Any

from commsim.cli._main import main

if TYPE_CHECKING:
    from types import ModuleType

    COMMANDS: tuple[ModuleType, ...]

__all__ = ["COMMANDS", "main"]


def __getattr__(name: str) -> Any:
    """``COMMANDS``: every command's module, imported on first use (PEP 562)."""
    if name != "COMMANDS":
        raise AttributeError(f"module 'commsim.cli' has no attribute {name!r}")
    from commsim.cli._main import commands

    globals()["COMMANDS"] = value = commands()
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"COMMANDS"})
