"""``commsim topology``: what a network is — hosts, switches, links by class, diameter,
bisection bandwidth — and a drawing of it when it is small."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsim import units
from commsim.cli.errors import EXIT_OK, UsageError, quote
from commsim.cli.network import names_a_cluster, resolve
from commsim.cli.output import add_output_group, format_table, to_json
from commsim.topology import MAX_DRAW_NODES, TopologySummary, draw, summarize

if TYPE_CHECKING:
    from commsim.clusters import Edited

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "TopologyRequest",
    "TopologyResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "summarize a network (a generator, a graph file or a cluster) and draw it"
DESCRIPTION = """\
Hosts, switches and servers; per link class the number of links (cables: an undirected edge
counts once), bandwidth per direction and latency; the diameter (most links on a route
between two hosts, over every pair up to 512 hosts, else over a sample); and the bisection
bandwidth per direction: the least capacity of a cut that splits the hosts in half, as the
generator states it where its formula is exact, else found by enumerating every cut (small
networks) or bounded from above by a heuristic (labelled so). --draw writes a picture of a
small network.

A cluster preset and a generator may share a name: dragonfly:G is the Slingshot-like
cluster preset, dragonfly:G,A,P,H (more than one argument) the generator."""
EXAMPLES = """\
  commsim topology fat_tree:64,hosts_per_leaf=16,oversubscription=4
  commsim topology dgx-h100:128
  commsim topology torus:8x8 --draw torus.png
  commsim topology dgx-h100:4 --draw dgx.png --json
  commsim topology dragonfly:9,4,2,2 --draw dragonfly.png
  commsim topology fat_tree:40,hosts_per_leaf=16,oversubscription=2
  commsim topology my_graph.graphml
  commsim topology my_cluster.toml"""

_DRAW_FORMATS = (".png", ".pdf", ".svg")


@dataclasses.dataclass(frozen=True)
class TopologyRequest:
    """Summarize ``spec`` (a generator spec, a graph file, a cluster preset or file); draw it to
    ``draw`` if given."""

    spec: str
    draw: Path | None = None
    as_json: bool = False
    toml: Path | None = None  # write the cluster as a TOML file
    sets: tuple[str, ...] = ()  # --set FIELD=VALUE on a cluster


@dataclasses.dataclass(frozen=True)
class TopologyResult:
    summary: TopologySummary
    drawing: Path | None
    toml: Path | None = None
    library: dict[str, Any] | None = None  # a cluster's collective-library fields


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec",
        metavar="NAME[:ARGS]|FILE|PRESET",
        help="a generator (torus:8x8, fat_tree:1024), a graph file (.graphml, .gml, .json), a "
        "cluster preset (dgx-h100:128) or a cluster file (.toml)",
    )
    parser.add_argument(
        "--draw",
        metavar="FILE",
        help=f"also draw it (.png, .pdf or .svg; networks of at most {MAX_DRAW_NODES} nodes)",
    )
    parser.add_argument(
        "--toml",
        metavar="FILE",
        help="write a cluster (a preset such as dgx-h100:64, or a cluster file) as a TOML "
        "cluster file to edit; --cluster FILE reads it back",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="change one field of a cluster preset or file, as its TOML file names it: "
        "sharp=true, inter.bandwidth=800Gb/s, nodes=32 (repeatable; with --toml, written out)",
    )
    add_output_group(parser, memory_limit=False)


def parse(args: argparse.Namespace) -> TopologyRequest:
    path = None
    if args.draw:
        path = Path(args.draw)
        if path.suffix.lower() not in _DRAW_FORMATS:
            raise UsageError(f"--draw {quote(args.draw)}: the name must end in .png, .pdf or .svg")
        if not path.parent.is_dir():
            raise UsageError(f"--draw {quote(args.draw)}: its directory does not exist")
    toml = None
    if getattr(args, "toml", None):
        toml = Path(args.toml)
        if toml.suffix.lower() != ".toml":
            raise UsageError(f"--toml {quote(args.toml)}: the name must end in .toml")
        if not toml.parent.is_dir():
            raise UsageError(f"--toml {quote(args.toml)}: its directory does not exist")
    sets = tuple(getattr(args, "set", None) or ())
    if sets and not names_a_cluster(args.spec):
        raise UsageError(
            f"--set changes a cluster's fields, and {quote(args.spec)} is a bare network"
        )
    return TopologyRequest(args.spec, path, args.json, toml, sets)


def compute(request: TopologyRequest) -> TopologyResult:
    from commsim.clusters import Edited

    spec = Edited(request.spec, request.sets) if request.sets else request.spec
    name, network = resolve(spec)
    summary = summarize(network)
    summary = dataclasses.replace(summary, name=name)
    try:
        drawing = draw(network, request.draw, title=name) if request.draw else None
    except OSError as e:
        raise UsageError(f"--draw {request.draw}: cannot write ({e.strerror or e})") from None
    toml = _write_toml(spec, request.toml) if request.toml else None
    return TopologyResult(summary, drawing, toml, _library(spec))


def _library(spec: str | Edited) -> dict[str, Any] | None:
    """What the cluster's collective library adds (docs/library.md), or ``None`` for a bare
    network or a cluster that adds nothing."""
    from commsim.clusters import cluster

    if not names_a_cluster(str(getattr(spec, "spec", spec))):
        return None
    c = cluster(spec)
    out = {
        "launch_s": c.launch,
        "reduction_overlap": c.reduction_overlap,
        "link_efficiency": c.link_efficiency,
        **({"nvls_efficiency": c.nvls_efficiency} if c.nvls else {}),
        **({"sharp_efficiency": c.sharp_efficiency} if c.sharp else {}),
        **({"profiles": {k: v.to_dict() for k, v in c.profiles.items()}} if c.profiles else {}),
    }
    adds = c.launch or c.reduction_overlap or c.link_efficiency or c.nvls or c.sharp
    return out if adds or c.profiles else None


def _write_toml(spec: str | Edited, path: Path) -> Path:
    """The cluster of ``spec`` as a TOML cluster file at ``path`` (a bare graph has none)."""
    from commsim.clusters import PRESETS, description, to_toml

    base = str(getattr(spec, "spec", spec))
    name = base.partition(":")[0].strip().lower()
    if name not in PRESETS and not base.strip().endswith(".toml"):
        raise UsageError(
            f"--toml writes a cluster (a preset such as dgx-h100:4, or a .toml file), and "
            f"{quote(spec)} is a bare network"
        )
    d, origin, _ = description(spec)
    text = f"# written by commsim topology {spec} --toml (from {origin})\n" + to_toml(d)
    try:
        path.write_text(text)
    except OSError as e:
        raise UsageError(f"--toml {path}: cannot write ({e.strerror or e})") from None
    return path


def render(result: TopologyResult, as_json: bool) -> str:
    s = result.summary
    if as_json:
        return to_json(
            {
                **s.to_dict(),
                "drawing": str(result.drawing) if result.drawing else None,
                "toml": str(result.toml) if result.toml else None,
                **({"library": result.library} if result.library else {}),
            }
        )
    rows = [
        [
            c.kind,
            f"{c.links:,}",
            _span(c.bandwidth, units.format_bandwidth),
            _span(c.latency, units.format_time),
        ]
        for c in s.classes
    ]
    diameter = f"{s.diameter} links" + ("" if s.diameter_exact else " (over a sample of pairs)")
    if s.bisection_bandwidth is None:
        bis = "not computed (too large; set graph['bisection_bandwidth'])"
    else:
        how = {"stated": "as the graph states it", "exact": "exact"}.get(
            s.bisection_method or "", "heuristic upper bound"
        )
        bis = f"{units.format_bandwidth(s.bisection_bandwidth)} per direction ({how})"
    lines = [
        f"{s.name}: {_count(s.hosts, 'host')}, {_count(s.switches, 'switch')}, "
        f"{_count(s.servers, 'server')}",
        "",
        format_table(["link class", "links", "bandwidth", "latency"], rows, "lrrr"),
        "",
        f"diameter: {diameter}",
        f"routing: {s.routing}",
        f"bisection bandwidth: {bis}",
    ]
    if s.reducing_switches:
        tiers = [
            (s.reducing_switches - s.fabric_reducing, "server switch", "NVLink SHARP: nvls rows"),
            (s.fabric_reducing, "fabric switch", "InfiniBand SHARP: collnet_direct"),
        ]
        said = [f"{_count(n, what)} ({why})" for n, what, why in tiers if n]
        verb = "reduces" if s.reducing_switches == 1 else "reduce"
        lines.append(
            f"in-network reduction: {' and '.join(said)} {verb}; the in-network rows' helpers "
            "sit there"
        )
    lib = result.library
    if lib:
        parts = [f"per-call launch {units.format_time(lib['launch_s'])}"] if lib["launch_s"] else []
        parts += ["reduction overlapped with the transfer"] if lib["reduction_overlap"] else []
        parts += [f"{k} driven at {v:.1%} of its rate" for k, v in lib["link_efficiency"].items()]
        if "nvls_efficiency" in lib:
            parts.append(f"in-switch reduction at {lib['nvls_efficiency']:.0%} of that")
        if "sharp_efficiency" in lib:
            parts.append(f"SHARP in the fabric at {lib['sharp_efficiency']:.0%}")
        for name, prof in lib.get("profiles", {}).items():
            ends = [units.format_size(prof["sizes"][i]) for i in (0, -1)]
            parts.append(f"{name} messages capped by a measured profile ({ends[0]}..{ends[1]})")
        lines.append(f"collective library: {', '.join(parts)} (docs/library.md)")
    if result.drawing is not None:
        lines.append(f"drawing written to {result.drawing}")
    if result.toml is not None:
        lines.append(f"cluster file written to {result.toml} (edit it; --cluster {result.toml})")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    """``"1 server"``, ``"8 hosts"``, ``"10 switches"``."""
    plural = noun + ("es" if noun.endswith("ch") else "s")
    return f"{n:,} {noun if n == 1 else plural}"


def _span(pair: tuple[float, float], fmt) -> str:
    lo, hi = pair
    return fmt(lo) if lo == hi else f"{fmt(lo)}..{fmt(hi)}"


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
