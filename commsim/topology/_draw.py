"""Draw a small topology to an image: hosts as circles, switches as squares, link classes in
colour (matplotlib, non-interactive)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._network import Network

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["MAX_DRAW_NODES", "draw"]

#: Graphs with more nodes are refused: the drawing would be a hairball.
MAX_DRAW_NODES = 300


def _layout(g: nx.Graph) -> dict:
    routing = g.graph.get("routing")
    if routing and routing[0] == "torus" and len(routing[1]) <= 2:
        dims = routing[1] if len(routing[1]) == 2 else (1, routing[1][0])
        if len(routing[1]) == 1:  # a ring: on a circle
            n = routing[1][0]
            return {v: (np.cos(2 * np.pi * v / n), np.sin(2 * np.pi * v / n)) for v in g}
        return {v: (v % dims[1], -(v // dims[1])) for v in g}
    switches = [v for v, k in g.nodes(data="kind") if k == "switch"]
    if switches and all(isinstance(v, tuple) and v[0] == "router" for v in switches):
        return _grouped(g, switches)
    if switches:
        pos = _layered(g)
        flat = any(pos[u][1] == pos[v][1] and pos[u][1] > 0 for u, v in g.edges())
        if not flat:  # a tree-like fabric; switches joined within a layer (a dragonfly) below
            return pos
    return nx.kamada_kawai_layout(g)


def _is_round(g: nx.Graph) -> bool:
    """Laid out on circles (a ring, a dragonfly): drawn with equal axes."""
    routing = g.graph.get("routing")
    if routing and routing[0] == "torus" and len(routing[1]) == 1:
        return True
    switches = [v for v, k in g.nodes(data="kind") if k == "switch"]
    return bool(switches) and all(isinstance(v, tuple) and v[0] == "router" for v in switches)


def _grouped(g: nx.Graph, routers: list) -> dict:
    """A dragonfly (routers named ``("router", group, index)``): groups around a circle, each
    group's routers in order on the outer side of a small circle, its hosts in order on an
    outer circle across the group's arc."""
    groups = sorted({v[1] for v in routers})
    slot = {x: i for i, x in enumerate(groups)}
    size: dict = {}
    for v in routers:
        size[v[1]] = size.get(v[1], 0) + 1
    arc = 2 * np.pi / len(groups)
    rho = 0.5 * np.sin(arc / 2) if len(groups) > 1 else 0.5
    pos = {}
    for v in routers:
        theta = arc * slot[v[1]]
        phi = theta + 2 * np.pi / 3 * (2 * (v[2] + 0.5) / size[v[1]] - 1)  # facing out, in order
        pos[v] = (np.cos(theta) + rho * np.cos(phi), np.sin(theta) + rho * np.sin(phi))
    members: dict = {x: [] for x in groups}
    for v in sorted(routers, key=lambda v: (slot[v[1]], v[2])):
        members[v[1]] += [u for u in g.neighbors(v) if g.nodes[u].get("kind") != "switch"]
    for x, hosts in members.items():
        for j, u in enumerate(hosts):
            a = arc * (slot[x] - 0.4 + 0.8 * (j + 0.5) / len(hosts))
            pos[u] = ((1 + 2 * rho) * np.cos(a), (1 + 2 * rho) * np.sin(a))
    for u in g:  # anything else (a host on no router) at the centre
        pos.setdefault(u, (0.0, 0.0))
    return pos


def _layered(g: nx.Graph) -> dict:
    """Hosts in a row at the bottom, in order; each switch one layer above its lowest
    neighbour, placed over the mean position of the neighbours below it (then spread so that
    no two touch): a tree of switches is drawn above the hosts it serves."""
    hosts = [v for v, k in g.nodes(data="kind") if k != "switch"]
    level = {v: 0 for v in hosts}
    frontier = list(hosts)
    while frontier:
        nxt = []
        for v in frontier:
            for u in g.neighbors(v):
                if u not in level:
                    level[u] = level[v] + 1
                    nxt.append(u)
        frontier = nxt
    x = {v: float(i) for i, v in enumerate(hosts)}
    width = max(len(hosts) - 1, 1)
    for lv in range(1, max(level.values(), default=0) + 1):
        layer = [v for v in g if level.get(v) == lv]
        for v in layer:
            below = [x[u] for u in g.neighbors(v) if level.get(u, lv) < lv]
            x[v] = float(np.mean(below)) if below else width / 2
        if not layer:
            continue
        layer.sort(key=lambda v: x[v])
        wanted = float(np.mean([x[v] for v in layer]))
        gap = 0.8 * width / len(layer)  # spread so that no two touch
        for a, b in itertools.pairwise(layer):
            x[b] = max(x[b], x[a] + gap)
        # centred where its members wanted to be, within the hosts' width
        shift = wanted - float(np.mean([x[v] for v in layer]))
        shift = min(max(shift, -x[layer[0]]), width - x[layer[-1]])
        for v in layer:
            x[v] += shift
    return {v: (x.get(v, 0.0), level.get(v, 0) * width / 4) for v in g}


def draw(network: Network, path: str | Path, *, title: str | None = None) -> Path:
    """Write a drawing of ``network`` to ``path`` (.png, .pdf or .svg)."""
    g = network.graph
    if g.number_of_nodes() > MAX_DRAW_NODES:
        raise ParameterError(
            f"{g.number_of_nodes()} nodes are too many to draw (at most {MAX_DRAW_NODES}); "
            "use the summary instead"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    g = g.copy()
    pos = _layout(g)
    fig, ax = plt.subplots(figsize=(10, 7))
    colors = plt.get_cmap("tab10")

    def far(u, v) -> bool:  # a torus's wrap-around link: drawn as an arc, not over the row
        (x0, y0), (x1, y1) = pos[u], pos[v]
        routing = g.graph.get("routing")
        grid = routing and routing[0] == "torus" and len(routing[1]) == 2
        return bool(grid) and abs(x0 - x1) + abs(y0 - y1) > 1.01

    for i, kind in enumerate(network.kinds):
        edges = [(u, v) for u, v, k in g.edges(data="kind") if str(k or "link") == kind]
        near = [e for e in edges if not far(*e)]
        nx.draw_networkx_edges(
            g, pos, edgelist=near, edge_color=[colors(i % 10)], width=1.5, ax=ax, label=kind,
            arrows=False,
        )  # fmt: skip
        wrap = [e for e in edges if far(*e)]
        if wrap:
            nx.draw_networkx_edges(
                g, pos, edgelist=wrap, edge_color=[colors(i % 10)], width=1.0, ax=ax,
                arrows=True, arrowstyle="-", connectionstyle="arc3,rad=0.2", style="dashed",
            )  # fmt: skip
    hosts = [v for v, k in g.nodes(data="kind") if k != "switch"]
    switches = [v for v, k in g.nodes(data="kind") if k == "switch"]
    nx.draw_networkx_nodes(
        g,
        pos,
        nodelist=hosts,
        node_size=min(200, 6000 / max(len(hosts), 1)),
        node_color="#333333",
        ax=ax,
    )
    nx.draw_networkx_nodes(
        g, pos, nodelist=switches, node_size=140, node_shape="s", node_color="#bbbbbb",
        edgecolors="#333333", ax=ax,
    )  # fmt: skip
    if len(hosts) <= 32:
        nx.draw_networkx_labels(
            g, pos, labels={v: str(v) for v in hosts}, font_size=7, font_color="white", ax=ax
        )
    ax.legend(title="link class", loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(title or str(g.graph.get("name") or "topology"))
    ax.text(
        0.01, 0.01, f"{len(hosts)} hosts (circles), {len(switches)} switches (squares)",
        transform=ax.transAxes, fontsize=8,
    )  # fmt: skip
    if _is_round(g):
        ax.set_aspect("equal", adjustable="datalim")
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
