"""The network argument group: which network a topology-model prediction runs on.

``--topology NAME[:ARGS]|FILE`` names a generator (``torus:8x8x8``) or a graph file;
``--cluster PRESET|FILE.toml`` a hypothetical cluster (``dgx-h100:128``); ``--placement`` puts
ranks on its hosts; ``--contention`` says how messages share links. :func:`parse_network`
resolves them into a :class:`NetworkChoice` (``None`` when neither was given), which the model
group turns into a :class:`commsim.models.Topology`, and which supplies defaults the network
implies: ``-p`` (every host), the ``ranks_per_node`` of hierarchical algorithms and the
``dims`` of torus algorithms (a torus's shape).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim.cli.arguments import add_epilog
from commsim.cli.errors import UsageError, quote
from commsim.cli.schedules import ScheduleChoice
from commsim.errors import ParameterError, UnknownNameError
from commsim.models import CONTENTION, FLOW_RULES, PORT_RULES
from commsim.topology import (
    GENERATORS,
    Network,
    load_topology,
    parse_topology,
    place,
    ranks_per_server,
)

if TYPE_CHECKING:  # imported where used: a cluster builds its graph
    from commsim.clusters import Cluster, Edited

__all__ = [
    "NETWORK_EPILOG",
    "NetworkChoice",
    "add_network_group",
    "names_a_cluster",
    "parse_network",
    "resolve",
]

_GRAPH_SUFFIXES = (".graphml", ".gml", ".json")

NETWORK_EPILOG = f"""\
network (the topology model, chosen by --topology or --cluster):
  --cluster PRESET names a hypothetical cluster built from public specifications:
  dgx-h100:N (N DGX H100: NVLink4 inside, 8 x 400 Gb/s rails into a rail-optimized fat tree),
  dgx-h200:N, dgx-b200:N (NVLink5), dgx-a100:N, gb200-nvl72:N (N NVL72 racks),
  tpu-v4:AxBxC, tpu-v5p:AxBxC (3-D tori), tpu-v5e:AxB, tpu-v6e:AxB (2-D tori),
  dragonfly:G (Slingshot-like), ethernet:N (100 GbE, 2:1 leaf-spine); or a TOML file.
  docs/clusters.md lists the numbers and their sources.
  Hierarchical algorithms get its ranks_per_node; torus algorithms its shape as dims
  (on a torus topology or a tpu-* cluster, every chip in order).
  --topology NAME[:ARGS] names a generator: {", ".join(sorted(GENERATORS))}; e.g. torus:8x8x8,
  switch:64,bandwidth=400Gb/s,latency=1us; or a graph file (.graphml, .gml, node-link .json)
  whose edges carry bandwidth and latency. A message costs its path's latency plus its bytes
  over its share of the links it crosses (--contention: none = alone on its path; bottleneck =
  equal shares per link; maxmin = max-min fair rates; flow = event-driven flows, the accurate
  reference for small and medium p). Ranks sit one per host (--placement linear, round_robin,
  random[:SEED]); -p defaults to every host. The output adds the link class that limits each
  size (its busiest link) and the critical path.
"""


@dataclasses.dataclass(frozen=True, eq=False)
class NetworkChoice:
    """A resolved network: its ``name`` as given, the compiled :attr:`network`, the
    ``placement`` and ``contention`` chosen, and the ``cluster`` it came from (``None`` for
    ``--topology``), which owns ``ranks_per_node``, γ and the topology model
    (:func:`commsim.tuner.cluster_model`, what ``commsim.tune`` predicts with too). A cluster's
    network is compiled when first asked for (Hockney per link class never asks)."""

    name: str
    topology: Network | None  # --topology's network; None: the cluster's
    placement: str | tuple[int, ...]
    contention: str
    cluster: Cluster | None = None
    contention_given: bool = False
    port_rule: str = "channel"
    flow_rule: str = "fair"

    @property
    def network(self) -> Network:
        """The compiled network: ``--topology``'s, or the cluster's (built on first use)."""
        if self.topology is not None:
            return self.topology
        assert self.cluster is not None
        return self.cluster.network

    @property
    def ranks_per_node(self) -> int | None:
        """The cluster's declared ranks per server (``None`` on a bare topology)."""
        return None if self.cluster is None else self.cluster.ranks_per_node

    @property
    def gamma(self) -> float | None:
        """The cluster's reduction time per byte (``None`` on a bare topology)."""
        return None if self.cluster is None else self.cluster.gamma

    def default_nranks(self) -> int:
        return self.cluster.ngpus if self.cluster is not None else self.network.nhosts

    def servers_of(self, nranks: int) -> int | None:
        """Ranks per server under this placement (``None`` if a server's ranks are not
        consecutive): the cluster's rule (:meth:`commsim.clusters.Cluster.ranks_per_server`),
        or on a bare topology what the placement gives."""
        if self.cluster is not None:
            return self.cluster.ranks_per_server(nranks, self.placement)
        return ranks_per_server(self.network, place(self.network, nranks, self.placement))

    def with_ranks_per_node(self, choice: ScheduleChoice) -> tuple[ScheduleChoice, list[str]]:
        """``choice`` with ``ranks_per_node`` set to the network's for every algorithm that has
        that parameter and was not given it; and notes saying so."""
        from commsim.algorithms import info

        takers = [
            a
            for a in choice.algorithms
            if "ranks_per_node" in info(choice.collective, a).params
            and "ranks_per_node" not in choice.params[a]
        ]
        if not takers:
            return choice, []
        g = self.servers_of(max(choice.nranks))
        if g is None:
            return choice, [
                f"placement {_show(self.placement)} does not keep a server's ranks together: "
                f"{', '.join(takers)} keep their default ranks_per_node"
            ]
        params = {a: dict(v) for a, v in choice.params.items()}
        for a in takers:
            params[a]["ranks_per_node"] = g
        note = AlgorithmsNote.of(f"ranks_per_node={g} (from the network)", takers)
        return dataclasses.replace(choice, params=params), [note]

    def torus_dims(self, nranks: int) -> tuple[int, ...] | None:
        """The torus shape of the network (``torus:AxBxC``, a ``tpu-*`` cluster) when rank ``r``
        sits on chip ``r`` of it (every chip, placed in order); else ``None``."""
        record = self.network.graph.graph.get("routing")
        if not record or record[0] != "torus" or math.prod(record[1]) != nranks:
            return None
        hosts = place(self.network, nranks, self.placement)
        if not np.array_equal(hosts, np.arange(nranks)):
            return None
        return tuple(int(d) for d in record[1])

    def with_torus_dims(self, choice: ScheduleChoice) -> tuple[ScheduleChoice, list[str]]:
        """``choice`` with ``dims`` set to the torus's shape for every algorithm that has that
        parameter and was not given it (at the one ``p`` that fills the torus); and notes."""
        from commsim.algorithms import info

        takers = [
            a
            for a in choice.algorithms
            if "dims" in info(choice.collective, a).params and "dims" not in choice.params[a]
        ]
        if not takers or len(choice.nranks) != 1:
            return choice, []
        dims = [self.torus_dims(p) for p in choice.nranks]
        if dims[0] is None:
            return choice, []
        shape, p = "x".join(map(str, dims[0])), choice.nranks[0]
        fits = [a for a in takers if _accepts(info(choice.collective, a), p, shape)]
        notes = []
        if fits:
            notes.append(AlgorithmsNote.of(f"dims={shape} (the torus's shape)", fits))
        if len(fits) < len(takers):
            others = [a for a in takers if a not in fits]
            notes.append(AlgorithmsNote.of(f"dims={shape}", others,
                                           "{names} take no {what}: they keep their default"))  # fmt: skip
        params = {a: dict(v) for a, v in choice.params.items()}
        for a in fits:
            params[a]["dims"] = shape
        return dataclasses.replace(choice, params=params), notes

    def with_packed_rings(self, choice: ScheduleChoice) -> tuple[ScheduleChoice, list[str]]:
        """``choice`` with ``rings`` packed into the network's direct links
        (:func:`commsim.topology.pack_rings`, ranks on their placed hosts) for every algorithm
        that has that parameter and was not given it, at one ``p``; and a note saying how many."""
        from commsim.algorithms import info
        from commsim.algorithms.packed_rings import format_rings
        from commsim.topology import link_units, pack_rings

        takers = [
            a
            for a in choice.algorithms
            if "rings" in info(choice.collective, a).params and "rings" not in choice.params[a]
        ]
        if not takers or len(choice.nranks) != 1:
            return choice, []
        p = choice.nranks[0]
        net = self.network
        hosts = [net.nodes[net.hosts[h]] for h in place(net, p, self.placement)]
        if not link_units(net.graph, hosts).any():  # a switched network: nothing to pack, no note
            return choice, []
        try:
            orders = pack_rings(net.graph, hosts)
        except ParameterError as e:
            return choice, [AlgorithmsNote.of(str(e), takers, "{names} keep rings=auto: {what}")]
        if not orders:
            why = "the hosts have no ring of direct links"
            return choice, [AlgorithmsNote.of(why, takers, "{names} keep rings=auto: {what}")]
        params = {a: dict(v) for a, v in choice.params.items()}
        for a in takers:
            params[a]["rings"] = format_rings(orders)
        note = AlgorithmsNote.of(f"{len(orders)} rings packed into the direct links", takers)
        return dataclasses.replace(choice, params=params), [note]

    def with_packed_trees(self, choice: ScheduleChoice) -> tuple[ScheduleChoice, list[str]]:
        """``choice`` with ``trees`` packed into the network's direct links
        (:func:`commsim.topology.pack_trees`, ranks on their placed hosts, from the root alone
        for a rooted collective) for every algorithm that has that parameter and was not given
        it, or was given ``trees=pack``, at one ``p``; ``segments``, when not given, as
        :mod:`commsim.cli.packing` says. A failed
        ``trees=pack`` is an error; a failed default keeps ``trees=auto``, with a note."""
        from commsim.cli.packing import pack_trees_for

        return pack_trees_for(self, choice)

    def with_network_params(self, choice: ScheduleChoice) -> tuple[ScheduleChoice, list[str]]:
        """:meth:`with_ranks_per_node`, :meth:`with_torus_dims`, :meth:`with_packed_rings`, then
        :meth:`with_packed_trees`: every algorithm parameter the network implies, with one note
        per parameter set."""
        choice, notes = self.with_ranks_per_node(choice)
        choice, more = self.with_torus_dims(choice)
        choice, rings = self.with_packed_rings(choice)
        choice, trees = self.with_packed_trees(choice)
        return choice, notes + more + rings + trees


class AlgorithmsNote(str):
    """A note that a setting applies to some algorithms (``"WHAT for a, b"``, or its own
    ``template``), which knows its ``what`` and ``algorithms`` so that a command can leave out
    the rows it skipped (:meth:`without`). A ``str``: it prints and serialises as its text."""

    what: str
    algorithms: tuple[str, ...]
    template: str

    @classmethod
    def of(
        cls, what: str, algorithms: Sequence[str], template: str = "{what} for {names}"
    ) -> AlgorithmsNote:
        """The note ``template`` (``{what}``, ``{names}``: the algorithms, comma-separated)."""
        note = cls(template.format(what=what, names=", ".join(algorithms)))
        note.what, note.algorithms, note.template = what, tuple(algorithms), template
        return note

    def without(self, skipped: Collection[str]) -> AlgorithmsNote | None:
        """This note about the algorithms not in ``skipped`` (``None``: none is left)."""
        kept = [a for a in self.algorithms if a not in skipped]
        return AlgorithmsNote.of(self.what, kept, self.template) if kept else None


def without_skipped(notes: Sequence[str], skipped: Collection[str]) -> tuple[str, ...]:
    """``notes`` with the algorithms in ``skipped`` left out of every :class:`AlgorithmsNote`
    (and a note about those alone dropped)."""
    kept = (n.without(skipped) if isinstance(n, AlgorithmsNote) else n for n in notes)
    return tuple(n for n in kept if n is not None)


def _accepts(row: Any, nranks: int, dims: str) -> bool:
    """Whether ``row`` takes ``dims`` at ``nranks`` (its cost formula checks the grid as its
    factory does, without building a schedule)."""
    try:
        row.time(nranks, 0.0, 0.0, 0.0, 0.0, dims=dims)
    except ParameterError:
        return False
    return True


def _show(placement: str | tuple[int, ...]) -> str:
    return placement if isinstance(placement, str) else "explicit"


def _placement(text: str | None) -> str | tuple[int, ...] | None:
    """``--placement``: a rule name, or host indices ``3,0,1,2`` (one per rank) or ``@FILE``
    (whitespace- or comma-separated host indices)."""
    if text is None:
        return None
    if not text.strip():
        raise UsageError("--placement is empty: give linear, round_robin, random[:SEED] or hosts")
    body = text
    if text.startswith("@"):
        try:
            body = Path(text[1:]).read_text()
        except OSError as e:
            raise UsageError(
                f"--placement {quote(text)}: cannot read ({e.strerror or e})"
            ) from None
    items = body.replace(",", " ").split()
    if (
        items
        and all(x.isdigit() for x in items)
        and (text.startswith("@") or "," in text or text.isdigit())
    ):
        return tuple(int(x) for x in items)
    if text.startswith("@"):
        raise UsageError(f"--placement {quote(text)}: the file must list host indices")
    return text


def add_network_group(parser: argparse.ArgumentParser) -> None:
    """Add ``--topology --cluster --placement --contention`` and their help."""
    g = parser.add_argument_group("network (topology model)")
    g.add_argument(
        "--topology",
        metavar="NAME[:ARGS]|FILE",
        help="predict on this network: a generator spec (torus:8x8x8, switch:64) or a graph file",
    )
    g.add_argument(
        "--cluster",
        metavar="PRESET|FILE.toml",
        help="predict on a hypothetical cluster: dgx-h100:128, dgx-h200:N, dgx-b200:N, "
        "dgx-a100:N, gb200-nvl72:N, "
        "tpu-v5p:4x4x8, tpu-v4:AxBxC, tpu-v5e:AxB, tpu-v6e:AxB, dragonfly:G, ethernet:N, or a TOML file (docs/clusters.md)",
    )
    g.add_argument(
        "--placement",
        default=None,
        metavar="HOW",
        help="ranks on hosts: linear, round_robin (across servers), random[:SEED], host indices "
        "one per rank (0,2,4,6,1,3,5,7) or @FILE of them (default: linear, or the cluster "
        "file's)",
    )
    g.add_argument(
        "--contention",
        default=None,
        choices=CONTENTION,
        metavar="MODE",
        help=f"how messages share links: {', '.join(CONTENTION)} (default: bottleneck; flow "
        "simulates once per size, so give it few sizes at large p)",
    )
    g.add_argument(
        "--port-rule",
        default=None,
        choices=PORT_RULES,
        metavar="RULE",
        help="channel: a rank sends one message per channel at a time (default); link: one per "
        "channel on each link of its host at once (NVLink beside the NIC, a torus chip's "
        "links; docs/sharp-bits.md, Ports and links)",
    )
    g.add_argument(
        "--flow-rule",
        default=None,
        choices=FLOW_RULES,
        metavar="RULE",
        help="with --contention flow: fair: a message's bytes move from its start, links are "
        "shared equally, its path latency comes after its last byte (default); cm02: SimGrid's "
        "CM02 model, TCP-like: the path latency first, then shares in proportion to 1 / path "
        "latency (docs/sharp-bits.md, Flow rules)",
    )
    g.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="change one field of the --cluster preset or file, as its TOML file names it: "
        "inter.bandwidth=800Gb/s, nodes=32, topology.oversubscription=2, launch=5us "
        "(repeatable; 'commsim topology PRESET --toml FILE' shows the fields)",
    )
    add_epilog(parser, NETWORK_EPILOG)


def parse_network(args: argparse.Namespace) -> NetworkChoice | None:
    """The network of ``--topology`` or ``--cluster`` (``None`` if neither), checked; a
    cluster's network is compiled when first asked for."""
    from commsim.clusters import Edited, cluster

    text, preset = getattr(args, "topology", None), getattr(args, "cluster", None)
    placement_given = _placement(getattr(args, "placement", None))
    contention_given = getattr(args, "contention", None)
    contention = contention_given or "bottleneck"
    rule_given = getattr(args, "port_rule", None)
    port_rule = rule_given or "channel"
    flow_given = getattr(args, "flow_rule", None)
    flow_rule = flow_given or "fair"
    if flow_rule != "fair" and contention != "flow":
        raise UsageError(
            f"--flow-rule {flow_rule} is a rule of the flow simulation: add --contention flow"
        )
    if text is not None and preset is not None:
        raise UsageError("give --topology or --cluster, not both")
    sets = getattr(args, "set", None) or []
    if sets and preset is None:
        raise UsageError("--set changes a cluster's fields: add --cluster PRESET or FILE.toml")
    if preset is not None:
        c = cluster(Edited(preset, tuple(sets)) if sets else preset)
        placement = placement_given or c.placement
        _check_port_rule(port_rule, c, preset)
        return NetworkChoice(
            preset, None, placement, contention, c, contention_given is not None, port_rule,
            flow_rule,
        )  # fmt: skip
    if text is None:
        for flag, given in (
            ("--placement", placement_given),
            ("--contention", contention_given),
            ("--port-rule", rule_given),
            ("--flow-rule", flow_given),
        ):
            if given is not None:
                raise UsageError(f"{flag} needs a network: --topology or --cluster")
        return None
    network = Network(_graph(text))
    _check_port_rule(port_rule, network, text)
    return NetworkChoice(
        text, network, placement_given or "linear", contention,
        contention_given=contention_given is not None, port_rule=port_rule, flow_rule=flow_rule,
    )  # fmt: skip


def _check_port_rule(port_rule: str, network: Network | Cluster, name: str) -> None:
    """``--port-rule link`` where every host has one link would change nothing: refuse it."""
    if port_rule != "link":
        return
    if not isinstance(network, Network):
        network = network.network
    degree = np.diff(network.out_indptr)[network.hosts]
    if degree.max() <= 1:
        raise UsageError(
            f"--port-rule link changes nothing on {quote(name)}: every host has one link "
            "(a host with several, NVLink beside a NIC or a torus chip, drives them at once)"
        )


def _graph(text: str) -> Any:
    if Path(text).suffix.lower() in _GRAPH_SUFFIXES or Path(text).is_file():
        return load_topology(text)
    if not text.strip():
        raise UsageError(f"--topology {quote(text)}: give a generator spec or a graph file")
    return parse_topology(text)


def names_a_cluster(text: str) -> bool:
    """Whether ``text`` names a cluster (a preset or a ``.toml`` file) rather than a generator
    or a graph file: a name both a preset and a generator, ``dragonfly``, is the generator when
    given more than one argument or a keyword."""
    from commsim.clusters import PRESETS

    name, _, args = text.strip().partition(":")
    generator = name.replace("-", "_") in GENERATORS and ("," in args or "=" in args)
    return (name.lower() in PRESETS and not generator) or text.strip().endswith(".toml")


def resolve(text: str | Edited) -> tuple[str, Network]:
    """A network named any way the command line accepts: a cluster preset or ``.toml`` file (or
    one with ``--set`` fields, :class:`~commsim.clusters.Edited`), a graph file, or a generator
    spec (a name both a preset and a generator, ``dragonfly``, is the generator when given more
    than one argument or a keyword)."""
    from commsim.clusters import PRESETS, Edited, cluster

    if isinstance(text, Edited) or names_a_cluster(text):
        return str(text), cluster(text).network
    name = text.strip().partition(":")[0]
    known = [*PRESETS, *GENERATORS]
    is_file = Path(text).is_file() or Path(text).suffix.lower() in _GRAPH_SUFFIXES
    if name.replace("-", "_") not in GENERATORS and not is_file:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown network {name!r}{hint} (cluster presets: {', '.join(PRESETS)}; "
            f"generators: {', '.join(sorted(GENERATORS))}; or a graph or .toml file)"
        )
    return text, Network(_graph(text))
