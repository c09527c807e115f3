"""From a cluster description (a TOML file's tables, or a preset's) to a :class:`Cluster`.

The description (every preset is one too, so there is one path from numbers to graph)::

    name = "my-cluster"  # optional
    nodes = 16  # servers
    gpus_per_node = 8  # hosts per server, one rank each (default 1)
    placement = "linear"  # optional: linear, round_robin, random[:SEED]
    reduction = "1.1TB/s"  # optional: how fast a GPU reduces received data (γ = 1/reduction)
    launch = "6.6us"  # optional: the collective library's per-call cost (default 0)
    reduction_overlap = true  # optional: reduce while receiving (GPU kernels; default false)
    channel_bandwidth = "60GB/s"  # optional: the library's per-channel rate cap (default none)
    nvls = true  # optional: each server's NVSwitch reduces (NVLink SHARP; default false)
    nvls_efficiency = 0.85  # optional, with nvls: the share of the NVLinks' rate the switch's
    # reductions reach (default 1; without nvls it has no effect)
    sharp = true  # optional: the leaves the GPUs' NICs join reduce (InfiniBand SHARP; false)
    sharp_efficiency = 0.85  # optional, with sharp: as nvls_efficiency, for those switches
    fitted_up_to = "16MiB"  # written by calibrate --from-nccl-tests: the rows it fitted

    [intra]  # the links inside a server (GPU to NVSwitch)
    kind = "nvlink"  # the link class's name (default "nvlink")
    bandwidth = "450GB/s"  # per direction
    latency = "0.5us"
    efficiency = 0.824  # optional: the share of the rate the library reaches (default 1)

    [inter]  # each GPU's NIC port into the fabric
    bandwidth = "400Gb/s"
    latency = "1us"

    [topology]  # the fabric between servers
    kind = "rail_optimized"  # rail_optimized | fat_tree | dragonfly | torus | switch
    routing = "dmodk"  # rail_optimized and fat_tree: "ecmp" (default) or "dmodk"
    nodes_per_unit = 32  # ... and the generator's own keywords

    [intra]  # or: the link class as measured (`commsim calibrate -o intra.toml`)
    profile = "intra.toml"  # latency = the message curve at 0 B, bandwidth = its last slope

    [profiles.inter]  # optional: measured rates by message size, which cap the class's messages
    sizes = ["1KiB", "1MiB", "1GiB"]
    bandwidth = ["2GB/s", "35GB/s", "48GB/s"]

Every problem is one :class:`~commsim.ParameterError` line naming the field
(``cluster x.toml: [inter] bandwidth: ...``).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim import units
from commsim._lazy import lazy_module
from commsim.clusters._cluster import Cluster, LinkClass, LinkProfile
from commsim.errors import CommsimError, ParameterError
from commsim.profiles import load_profile
from commsim.topology import (
    as_bandwidth,
    as_latency,
    as_share,
    call_problem,
    check_hosts,
    dragonfly,
    fat_tree,
    hybrid_cube_mesh,
    join,
    nvlink_island,
    rail_optimized,
    switch,
    torus,
)

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["FABRICS", "build_cluster"]

_TOP = (
    "name",
    "nodes",
    "gpus_per_node",
    "placement",
    "reduction",
    "launch",
    "reduction_overlap",
    "channel_bandwidth",
    "nvls",
    "nvls_efficiency",
    "sharp",
    "sharp_efficiency",
    "intra",
    "inter",
    "topology",
    "profiles",
    "sources",
    "fitted_up_to",
)
_LINK = ("kind", "bandwidth", "latency", "efficiency", "profile")
FABRICS = ("rail_optimized", "fat_tree", "dragonfly", "torus", "switch", "hybrid_cube_mesh")
_ROUTED = ("rail_optimized", "fat_tree")  # the fabrics that take ``routing``


class _Where:
    """Error messages that name the field: ``cluster NAME: [table] key: problem``; ``base`` is
    the directory relative file names (a link's ``profile``) start from."""

    def __init__(self, origin: str, base: Path | None = None) -> None:
        self.origin, self.base = origin, base or Path.cwd()

    def error(self, field: str, problem: str) -> ParameterError:
        return ParameterError(f"cluster {self.origin}: {field}: {problem}")

    def unknown(self, table: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"
                raise self.error(f"{prefix}{key}", f"unknown field{hint}")


def _int(where: _Where, field: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise where.error(field, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _table(
    where: _Where, d: Mapping[str, Any], key: str, required: bool
) -> Mapping[str, Any] | None:
    value = d.get(key)
    if value is None:
        if required:
            raise where.error(f"[{key}]", "missing table")
        return None
    if not isinstance(value, Mapping):
        raise where.error(f"[{key}]", f"must be a table, got {value!r}")
    return value


def _value(where: _Where, field: str, parse: Callable[[Any, str], float], value: Any) -> float:
    """``parse(value)``, its error named as ``field`` (``[inter] bandwidth: must be > 0 ...``)."""
    name = field.split()[-1]
    try:
        return parse(value, name)
    except ParameterError as e:
        problem = str(e).removeprefix(f"{name}: ").removeprefix(f"{name} ")
        raise where.error(field, problem) from None


def _link(where: _Where, d: Mapping[str, Any], key: str, default_kind: str) -> LinkClass | None:
    t = _table(where, d, key, required=False)
    if t is None:
        return None
    where.unknown(t, _LINK, f"[{key}] ")
    if "profile" in t:
        bw, lat = _measured(where, key, t)
    else:
        for field in ("bandwidth", "latency"):
            if field not in t:
                raise where.error(f"[{key}] {field}", "missing (or give profile = FILE)")
        bw = _value(where, f"[{key}] bandwidth", as_bandwidth, t["bandwidth"])
        lat = _value(where, f"[{key}] latency", as_latency, t["latency"])
    kind = t.get("kind", default_kind)
    if not isinstance(kind, str) or not kind:
        raise where.error(f"[{key}] kind", f"must be a name, got {kind!r}")
    efficiency = _value(where, f"[{key}] efficiency", as_share, t.get("efficiency", 1.0))
    return LinkClass(kind, bw, lat, efficiency)


def _call(
    where: _Where,
    fn: Callable[..., nx.Graph],
    args: tuple,
    given: Mapping[str, Any],
    topo: Mapping[str, Any],
) -> nx.Graph:
    """``fn(*args, **given, **topo)``: ``given`` what the builder passes from the file's other
    tables, ``topo`` the ``[topology]`` fields; a bad field or value named as one."""
    taken = sorted(set(given) & set(topo))
    if taken:
        raise where.error(
            f"[topology] {taken[0]}", "comes from the [intra] and [inter] tables: give it there"
        )
    params = {**given, **topo}
    problem = call_problem(fn, args, params, noun="field")
    if problem:
        raise where.error("[topology]", f"{problem} for kind = {fn.__name__!r}")
    try:
        return fn(*args, **params)
    except CommsimError as e:
        raise where.error(f"[topology] kind = {fn.__name__!r}", str(e)) from None


def _measured(where: _Where, key: str, t: Mapping[str, Any]) -> tuple[float, float]:
    """A link class's ``(bandwidth, latency)`` from a profile: the message curve's time at 0 B
    and the inverse slope of its last piece (the rate large messages reach)."""
    given = [f for f in ("bandwidth", "latency") if f in t]
    if given:
        raise where.error(f"[{key}] {given[0]}", "give profile or bandwidth and latency, not both")
    if "efficiency" in t:
        raise where.error(
            f"[{key}] efficiency", "a profile is measured: its rate is the one reached; drop it"
        )
    name = t["profile"]
    if not isinstance(name, str) or not name:
        raise where.error(f"[{key}] profile", f"must be a file name, got {name!r}")
    path = Path(name) if Path(name).is_absolute() else where.base / name
    try:
        curve = load_profile(path).message_curve()
    except ParameterError as e:
        raise where.error(f"[{key}] profile", str(e)) from None
    beta = curve.fit.pieces[-1].beta
    return (float("inf") if beta == 0 else 1 / beta), float(curve.fit(0.0))


def build_cluster(d: Mapping[str, Any], origin: str, base: Path | None = None) -> Cluster:
    """The :class:`Cluster` a description ``d`` (module docstring) describes; relative file
    names in it start from ``base`` (the file's directory; default: the working directory)."""
    where = _Where(origin, base)
    where.unknown(d, _TOP, "")
    if "nodes" not in d:
        raise where.error("nodes", "missing (the number of servers)")
    nodes = _int(where, "nodes", d["nodes"])
    g = _int(where, "gpus_per_node", d.get("gpus_per_node", 1))
    placement = d.get("placement", "linear")
    if not isinstance(placement, str) or not re.fullmatch(
        r"linear|round[_-]robin|random(:\d+)?", placement
    ):
        raise where.error(
            "placement", f"must be linear, round_robin or random[:SEED], got {placement!r}"
        )
    intra = _link(where, d, "intra", "nvlink")
    inter = _link(where, d, "inter", "link")
    if inter is None:
        raise where.error("[inter]", "missing table (each GPU's link into the fabric)")
    topo = dict(_table(where, d, "topology", required=True) or {})
    for key in topo:
        if key in _TOP and key != "topology":  # nodes, gpus_per_node, nvls, sharp, ...
            raise where.error(
                f"[topology] {key}", f"a top-level field: write {key} = ... above the tables"
            )
    kind = topo.pop("kind", None)
    if kind not in FABRICS:
        close = difflib.get_close_matches(str(kind), FABRICS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise where.error(
            "[topology] kind", f"must be one of {', '.join(FABRICS)}, got {kind!r}{hint}"
        )
    if "routing" in topo and kind not in _ROUTED:
        raise where.error(
            "[topology] routing",
            f"only {' and '.join(_ROUTED)} fabrics take a routing; {kind} has its own",
        )
    if g > 1 and intra is None and kind != "torus":
        raise where.error(
            "[intra]", f"missing table: {g} GPUs per server need their intra-server links"
        )
    (nvls, nvls_efficiency), (sharp, sharp_efficiency) = _reducing(where, d, kind, g)
    name = d.get("name", origin)
    graph_of = _graph_of(where, kind, topo, nodes, g, intra, inter, (nvls, sharp), name)
    if intra is not None and intra.name == inter.name and intra.efficiency != inter.efficiency:
        raise where.error(
            "[inter] efficiency",
            f"[intra] and [inter] are one link class ({inter.name!r}) with two efficiencies "
            f"({intra.efficiency:g}, {inter.efficiency:g}): give them one, or name them apart",
        )
    classes = {c.name: c for c in (intra, inter) if c is not None}
    profiles = {}
    if d.get("profiles"):  # a profile may name any class of the graph: the graph says which
        graph = graph_of.kept[1] if graph_of.kept else graph_of(min(nodes, 2))
        profiles = _profiles(where, d, intra, inter, _graph_classes(graph))
    reduction = _value(where, "reduction", as_bandwidth, d.get("reduction", 100e9))
    launch = _value(where, "launch", as_latency, d.get("launch", 0.0))
    overlap = d.get("reduction_overlap", False)
    if not isinstance(overlap, bool):
        raise where.error("reduction_overlap", f"must be true or false, got {overlap!r}")
    cap = d.get("channel_bandwidth")
    if cap is not None:
        cap = _value(where, "channel_bandwidth", as_bandwidth, cap)
    sources = d.get("sources", "")
    fitted = d.get("fitted_up_to")
    if fitted is not None:
        try:
            fitted = units.parse_size(fitted)
        except units.UnitError as e:
            raise where.error("fitted_up_to", str(e)) from None
    return Cluster(
        str(name), nodes, g, graph_of, placement, classes, profiles, str(sources), reduction,
        launch, overlap, cap, kind in _TWO_SERVERS, nvls, nvls_efficiency, fitted, sharp,
        sharp_efficiency,
    )  # fmt: skip


#: fabrics whose graph is built on first use: GPU 0's routes to GPU 1 and to GPU 0 of server 1
#: are the same on two servers as on any number (:attr:`Cluster.two_servers_suffice`), and a
#: graph of two servers checks every field but the size, which :func:`check_hosts` checks
_TWO_SERVERS = ("rail_optimized", "switch")


def _graph_of(where, kind, topo, nodes, g, intra, inter, reducing, name) -> _GraphOf:
    """The cluster's graph for a number of servers, its fields checked now: built now (and
    kept) for most fabrics; for :data:`_TWO_SERVERS`, checked on a graph of two servers and
    the size checked, the whole graph built when something asks for it."""
    of = _GraphOf(where, kind, topo, g, intra, inter, reducing, str(name))
    if kind in _TWO_SERVERS:
        of(min(nodes, 2))
        try:
            check_hosts(nodes * g, kind)
        except ParameterError as e:
            raise where.error(f"[topology] kind = {kind!r}", str(e)) from None
        return of
    return dataclasses.replace(of, kept=(nodes, of(nodes)))


@dataclasses.dataclass(frozen=True, eq=False)
class _GraphOf:
    """A cluster's graph of ``n`` servers, named as the cluster (a callable that pickles, as
    the graph it replaces did); ``kept``: one ``(servers, graph)`` built already."""

    where: _Where
    kind: str
    topo: dict[str, Any]
    g: int
    intra: LinkClass | None
    inter: LinkClass
    reducing: tuple[bool, bool]  # (nvls, sharp): the servers' switches, the fabric's leaves
    name: str
    kept: tuple[int, nx.Graph] | None = None

    def __call__(self, n: int) -> nx.Graph:
        if self.kept is not None and self.kept[0] == n:
            return self.kept[1]
        nvls, sharp = self.reducing
        graph = _graph(self.where, self.kind, self.topo, n, self.g, self.intra, self.inter, nvls)
        if sharp:
            _sharp_leaves(graph, self.inter.name)
        graph.graph["name"] = self.name
        return graph


def _graph(where, kind, topo, nodes, g, intra, inter, nvls=False) -> nx.Graph:
    n = nodes * g
    link = {"bandwidth": inter.bandwidth, "latency": inter.latency}
    if kind == "rail_optimized":
        nv = {"nvlink_bandwidth": intra.bandwidth, "nvlink_latency": intra.latency} if intra else {}
        nv.update({"nvls": True} if nvls else {})
        graph = _call(where, rail_optimized, (nodes, g), {**link, **nv}, topo)
        return _rename(graph, {"nvlink": intra.name if intra else "nvlink", "rail": inter.name})
    if kind == "hybrid_cube_mesh":
        return _dgx1(where, topo, nodes, g, intra, inter)
    if kind == "torus":
        dims = topo.get("dims")
        if (
            not isinstance(dims, list)
            or not dims
            or any(isinstance(x, bool) or not isinstance(x, int) for x in dims)
        ):
            raise where.error(
                "[topology] dims", f"must be a list of integers such as [4, 4, 4], got {dims!r}"
            )
        if int(np.prod(dims)) != n:
            raise where.error(
                "[topology] dims",
                f"{'x'.join(map(str, dims))} = {int(np.prod(dims))} chips, but {nodes} x {g} = {n}",
            )
        graph = _call(
            where,
            torus,
            (tuple(dims),),
            {**link, "kind": inter.name},
            {k: v for k, v in topo.items() if k != "dims"},
        )
        nx.set_node_attributes(graph, {h: h // g for h in range(n)}, "node")
        return graph
    if kind == "switch":
        fabric = _call(where, switch, (n,), {**link, "kind": inter.name}, topo)
    elif kind == "fat_tree":
        fabric = _rename(_call(where, fat_tree, (n,), link, topo), {"host": inter.name})
    else:
        fabric = _rename(_call(where, dragonfly, (), link, topo), {"host": inter.name})
        hosts = sum(1 for _, k in fabric.nodes(data="kind") if k != "switch")
        if hosts != n:
            raise where.error(
                "[topology]", f"this dragonfly has {hosts} hosts, but {nodes} x {g} = {n}"
            )
    if g == 1:
        nx.set_node_attributes(fabric, {h: h for h in range(n)}, "node")
        return fabric
    island = nvlink_island(g, bandwidth=intra.bandwidth, latency=intra.latency, reduce=nvls)
    nx.set_edge_attributes(island, intra.name, "kind")
    return join(island, fabric, nodes)


def _dgx1(where, topo, nodes, g, intra, inter) -> nx.Graph:
    """One DGX-1 (:func:`commsim.topology.hybrid_cube_mesh`): ``[intra]`` is one NVLink,
    ``[inter]`` the PCIe links; ``gpus`` (default all 8) must number ``gpus_per_node``."""
    gpus = topo.get("gpus", list(range(8)))
    if nodes != 1 or not isinstance(gpus, list) or len(gpus) != g:
        raise where.error(
            "[topology] gpus",
            f"a hybrid_cube_mesh is one server whose gpus list holds gpus_per_node = {g} GPUs, "
            f"got nodes = {nodes}, gpus = {gpus!r}",
        )
    nv = intra or LinkClass("nvlink", 25e9, 0.7e-6)
    params = {
        "bandwidth": nv.bandwidth,
        "latency": nv.latency,
        "pcie_bandwidth": inter.bandwidth,
        "pcie_latency": inter.latency,
    }
    graph = _call(where, hybrid_cube_mesh, (), params, topo)
    return _rename(graph, {"nvlink": nv.name, "pcie": inter.name})


def _reducing(
    where: _Where, d: Mapping[str, Any], kind: str, g: int
) -> tuple[tuple[bool, float], tuple[bool, float]]:
    """``((nvls, nvls_efficiency), (sharp, sharp_efficiency))``: whether the servers' NVSwitches
    and the fabric's leaves reduce, and the share of the rate a message to or from them reaches
    (1 where they do not reduce: nothing for it to slow, so ``--set nvls=false`` on a preset
    works)."""
    out = []
    for flag, needs, lacking in (
        ("nvls", "an NVSwitch in every server", g == 1 or kind in ("hybrid_cube_mesh", "torus")),
        ("sharp", "InfiniBand switches between the servers", kind in ("hybrid_cube_mesh", "torus")),
    ):
        on = d.get(flag, False)
        if not isinstance(on, bool):
            raise where.error(flag, f"must be true or false, got {on!r}")
        if on and lacking:
            has = f"{g} GPU per server on a {kind}" if flag == "nvls" else f"a {kind}"
            raise where.error(flag, f"needs {needs} ({has} has none)")
        share = _value(where, f"{flag}_efficiency", as_share, d.get(f"{flag}_efficiency", 1.0))
        out.append((on, share if on else 1.0))
    return out[0], out[1]


def _sharp_leaves(graph: nx.Graph, inter: str) -> None:
    """Mark the fabric's switches that a GPU's NIC link (class ``inter``) joins as reducing at
    the fabric tier (InfiniBand SHARP: ``reduce = "fabric"``, :mod:`commsim.topology`); never a
    server's own switch (one that reduces already, or joins two or more GPUs of one server
    only: an NVSwitch whose links share the NIC's class name)."""
    kind = dict(graph.nodes(data="kind"))
    server = dict(graph.nodes(data="node"))
    hosts: dict[object, list[object]] = {}
    for u, v, k in graph.edges(data="kind"):
        if k == inter and (kind.get(u) == "switch") != (kind.get(v) == "switch"):
            sw, host = (u, v) if kind.get(u) == "switch" else (v, u)
            hosts.setdefault(sw, []).append(host)
    leaves = {
        sw: "fabric"
        for sw, hs in hosts.items()
        if not graph.nodes[sw].get("reduce")
        and not (len(hs) > 1 and len({server.get(h, h) for h in hs}) == 1)
    }
    nx.set_node_attributes(graph, leaves, "reduce")


def _rename(graph: nx.Graph, names: Mapping[str, str]) -> nx.Graph:
    """The generator's link classes ``names`` renamed to the file's (``[inter] kind``)."""
    if any(k != v for k, v in names.items()):
        kinds = nx.get_edge_attributes(graph, "kind")
        nx.set_edge_attributes(graph, {e: names.get(k, k) for e, k in kinds.items()}, "kind")
    return graph


def _graph_classes(graph: nx.Graph) -> dict[str, float]:
    """The link classes of a cluster's graph, each with its fastest link's bandwidth."""
    out: dict[str, float] = {}
    for _, _, e in graph.edges(data=True):
        k = str(e.get("kind", "link"))
        out[k] = max(out.get(k, 0.0), as_bandwidth(e["bandwidth"]))
    return out


def _profiles(
    where: _Where,
    d: Mapping[str, Any],
    intra: LinkClass | None,
    inter: LinkClass,
    classes: Mapping[str, float],
) -> dict[str, LinkProfile]:
    """``[profiles.CLASS]``: measured rates by link class name (``intra``/``inter`` name the
    classes of those tables; any other class of the graph, a fabric's ``spine``, by its name),
    each rate at most the class's bandwidth (its fastest link's)."""
    t = _table(where, d, "profiles", required=False) or {}
    tables = {"inter": inter, **({"intra": intra} if intra is not None else {})}
    out = {}
    for key, prof in t.items():
        field = f"[profiles.{key}]"
        name = tables[key].name if key in tables else key
        if name not in classes:
            known = ", ".join(dict.fromkeys([*tables, *classes]))
            raise where.error(field, f"no link class {key!r} (classes: {known})")
        link = LinkClass(name, classes[name], 0.0)
        if not isinstance(prof, Mapping):
            raise where.error(field, "must be a table with sizes and bandwidth")
        where.unknown(prof, ("sizes", "bandwidth"), f"{field} ")
        sizes, bws = prof.get("sizes"), prof.get("bandwidth")
        if (
            not isinstance(sizes, list)
            or not isinstance(bws, list)
            or len(sizes) != len(bws)
            or not sizes
        ):
            raise where.error(field, "needs lists sizes and bandwidth of the same, non-zero length")
        try:
            s = np.array([units.parse_size(x) for x in sizes], dtype=np.float64)
            b = np.array([as_bandwidth(x) for x in bws])
        except (units.UnitError, ParameterError) as e:
            raise where.error(field, str(e)) from None
        if (np.diff(s) <= 0).any():
            raise where.error(f"{field} sizes", "must increase")
        if (s <= 0).any():
            raise where.error(f"{field} sizes", "must be at least 1 byte")
        if b.max() > link.bandwidth * (1 + 1e-9):
            raise where.error(
                f"{field} bandwidth",
                f"{units.format_bandwidth(float(b.max()))} is above the {link.name} links' "
                f"{units.format_bandwidth(link.bandwidth)}: a link moves no more than its rate "
                "(raise the table's bandwidth, or check the measurement)",
            )
        if link.name in out:
            raise where.error(field, f"a second profile of link class {link.name!r}")
        out[link.name] = LinkProfile(link.name, s, b)
    return out
