"""Cluster presets from public specifications, and :func:`cluster` to resolve a name or a file.

Each preset is a function of its size returning a cluster description (the same tables a TOML
file has, :mod:`commsim.clusters._build`); ``docs/clusters.md`` lists every number with its
source, and says which are assumptions (per-link latencies mostly are). InfiniBand fabrics
(the DGX SuperPOD rails of dgx-h100, dgx-a100, gb200-nvl72) are routed d-mod-k, as their subnet
manager routes them; the Ethernet preset by an ECMP hash.

The GPU presets carry what NCCL adds on top of the network (:mod:`commsim.models._library`):
a per-call ``launch`` of :data:`NCCL_LAUNCH` and ``reduction_overlap`` (reduce-copy kernels).
Servers whose NVSwitch reduces (NVLink SHARP: third-generation NVSwitch and later, the H100,
H200, B200 and GB200 systems; not the A100's) set ``nvls`` (docs/clusters.md).

They also say how fast NCCL drives the NVLinks: NCCL's topology model rates one NVLink of a
GPU generation at ``SM80_NVLINK_BW`` = 20, ``SM90_NVLINK_BW`` = 20.6 and ``SM100_NVLINK_BW`` =
40.1 GB/s (``src/graph/topo.h``) against the 25, 25 and 50 GB/s per direction of NVLink 3, 4
and 5, so ``[intra] efficiency`` is their ratio (:data:`NVLINK_EFFICIENCY`); and it scales
NVLS by ``nvlsEfficiency`` (``src/graph/tuning.cc``: 0.85 Hopper, 0.74 Blackwell), the
presets' ``nvls_efficiency``. The link ``bandwidth`` stays the spec: the bounds use it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomllib

from commsim.clusters._build import build_cluster
from commsim.clusters._cluster import Cluster
from commsim.errors import ParameterError, UnknownNameError

__all__ = [
    "MAX_DRAGONFLY_GROUPS",
    "NCCL_LAUNCH",
    "NVLINK_EFFICIENCY",
    "NVLS_EFFICIENCY",
    "PRESETS",
    "cluster",
    "load_cluster",
]


def _count(spec: str, arg: str, what: str) -> int:
    if not re.fullmatch(r"\d+", arg.strip()) or int(arg) < 1:
        raise ParameterError(f"cluster {spec!r}: {what} must be an integer >= 1, got {arg!r}")
    return int(arg)


#: The per-call cost of the GPU presets: NCCL's base latency of its ring algorithm with the LL
#: protocol, the one it picks for small messages, where the per-call cost is what a user sees
#: (``src/graph/tuning.cc``, ``baseLatencies``, NCCL commit 5067397; the same for every GPU
#: generation). docs/library.md states the rule.
NCCL_LAUNCH = "6.6us"

#: The most groups of the ``dragonfly`` preset: a balanced dragonfly's :math:`a h + 1` with its
#: 32 routers of 16 global links per group (Kim et al. 2008; docs/clusters.md#dragonfly), where
#: every pair of groups still has a global link. Routes come from indices
#: (:mod:`commsim.topology._dragonfly_kernels`), so no routing table bounds it.
MAX_DRAGONFLY_GROUPS = 32 * 16 + 1

#: What a GPU collective library adds to every GPU preset (docs/library.md).
_NCCL = {"launch": NCCL_LAUNCH, "reduction_overlap": True}

#: GPU generation → the share of an NVLink's rate NCCL's kernels reach: NCCL's per-link rate
#: (``src/graph/topo.h``, NCCL commit 5067397: ``SM80_NVLINK_BW`` 20.0, ``SM90_NVLINK_BW``
#: 20.6, ``SM100_NVLINK_BW`` 40.1 GB/s) over the link's spec per direction (NVLink 3 and 4:
#: 25 GB/s, NVLink 5: 50 GB/s; NVIDIA's A100, H100 and Blackwell architecture documents).
#: Measured beside it: an H100 ring without NVLS at about 370 GB/s busbw (NVIDIA/nccl-tests#212),
#: 18 links × 20.6 GB/s = 370.8 GB/s.
NVLINK_EFFICIENCY = {"A100": 0.8, "Hopper": 0.824, "Blackwell": 0.802}  # 20/25, 20.6/25, 40.1/50

#: GPU generation → NCCL's ``nvlsEfficiency`` (``src/graph/tuning.cc``, commit 5067397): the
#: share of the NVLinks' rate an NVLS (switch-reduced) transfer reaches.
NVLS_EFFICIENCY = {"Hopper": 0.85, "Blackwell": 0.74}

#: NCCL's factor on CollNetDirect's bandwidth from compute capability 9.0 on (``tuning.cc``:
#: ``if (minCompCap >= 90) busBw *= .85``): the presets' ``sharp_efficiency``, which takes
#: effect with ``sharp = true`` (``--set sharp=true``: the fabric's switches reduce, InfiniBand
#: SHARP; off by default, as NCCL runs CollNet only with its SHARP plugin).
SHARP_EFFICIENCY = {"Hopper": 0.85, "Blackwell": 0.85}


def _dgx_superpod(
    system: str,
    *,
    generation: str,
    reduction: str,
    nvlink: str,
    nic: str,
    nodes_per_unit: int,
    nvls: bool,
) -> Callable[[str, str], dict[str, Any]]:
    """The preset of a DGX SuperPOD of ``system`` servers (``"H100"``): 8 GPUs per server on
    NVLink / NVSwitch (``nvlink`` per GPU per direction), one ``nic`` per GPU on rails of scalable
    units of ``nodes_per_unit`` servers, an InfiniBand fabric routed by destination (d-mod-k).
    ``docs/clusters.md#dgx-<system>`` gives every number's source and status."""

    def preset(spec: str, arg: str) -> dict[str, Any]:
        return {
            "name": spec,
            "nodes": _count(spec, arg, f"the number of DGX {system} nodes"),
            "gpus_per_node": 8,
            "reduction": reduction,
            **_NCCL,
            **({"nvls": True, "nvls_efficiency": NVLS_EFFICIENCY[generation]} if nvls else {}),
            **(
                {"sharp_efficiency": SHARP_EFFICIENCY[generation]}
                if generation in SHARP_EFFICIENCY
                else {}
            ),
            "intra": {
                "kind": "nvlink",
                "bandwidth": nvlink,
                "latency": "0.5us",
                "efficiency": NVLINK_EFFICIENCY[generation],
            },
            "inter": {"kind": "rail", "bandwidth": nic, "latency": "1us"},
            "topology": {
                "kind": "rail_optimized",
                "nodes_per_unit": nodes_per_unit,
                "spine_latency": "0.5us",
                "routing": "dmodk",
            },
            "sources": f"docs/clusters.md#dgx-{system.lower()}",
        }

    preset.__doc__ = f"DGX {system}: 8 GPUs on NVLink ({nvlink}), 8 NICs of {nic}, SuperPOD rails."
    return preset


# NVLink4 / NVSwitch, ConnectX-7; H200: the same server with H200's faster HBM (the reduction);
# B200: NVLink5 / NVSwitch, ConnectX-7; A100: NVLink3 / NVSwitch, ConnectX-6 HDR
# fmt: off
_dgx_h100 = _dgx_superpod("H100", generation="Hopper", reduction="1.1TB/s", nvlink="450GB/s",
                          nic="400Gb/s", nodes_per_unit=32, nvls=True)
_dgx_h200 = _dgx_superpod("H200", generation="Hopper", reduction="1.6TB/s", nvlink="450GB/s",
                          nic="400Gb/s", nodes_per_unit=32, nvls=True)
_dgx_b200 = _dgx_superpod("B200", generation="Blackwell", reduction="2.7TB/s", nvlink="900GB/s",
                          nic="400Gb/s", nodes_per_unit=32, nvls=True)
_dgx_a100 = _dgx_superpod("A100", generation="A100", reduction="680GB/s", nvlink="300GB/s",
                          nic="200Gb/s", nodes_per_unit=20, nvls=False)
# fmt: on


def _gb200_nvl72(spec: str, arg: str) -> dict[str, Any]:
    """GB200 NVL72 racks: 72 Blackwell GPUs on NVLink5 per rack, a 400 Gb/s NIC per GPU."""
    return {
        "name": spec,
        "nodes": _count(spec, arg, "the number of NVL72 racks"),
        "gpus_per_node": 72,
        "reduction": "2.7TB/s",
        **_NCCL,
        "nvls": True,
        "nvls_efficiency": NVLS_EFFICIENCY["Blackwell"],
        "sharp_efficiency": SHARP_EFFICIENCY["Blackwell"],
        "intra": {
            "kind": "nvlink",
            "bandwidth": "900GB/s",
            "latency": "0.5us",
            "efficiency": NVLINK_EFFICIENCY["Blackwell"],
        },
        "inter": {"kind": "rail", "bandwidth": "400Gb/s", "latency": "1us"},
        "topology": {
            "kind": "rail_optimized",
            "nodes_per_unit": 8,
            "spine_latency": "0.5us",
            "routing": "dmodk",
        },
        "sources": "docs/clusters.md#gb200-nvl72",
    }


def _tpu(
    generation: str,
    *,
    ndim: int,
    chips_per_host: int,
    ici: str,
    reduction: str,
    wraps: Callable[[list[int]], list[bool]],
    small_slices: bool = False,
) -> Callable[[str, str], dict[str, Any]]:
    """The preset of a Cloud TPU ``generation`` slice (``"v5p"``): chips on an ``ndim``-D torus
    of ICI links (``ici`` per link per direction), ``chips_per_host`` chips per host (with
    ``small_slices``, one host may hold a smaller slice, as v5e's 1x1 and 2x2), wrap-around in
    the dimensions ``wraps(dims)`` says.
    ``docs/clusters.md#tpu-<generation>`` gives every number's source and status."""
    shape = "x".join("ABC"[:ndim])
    example = "x".join(["4"] * ndim)

    def preset(spec: str, arg: str) -> dict[str, Any]:
        m = re.fullmatch(r"\s*" + r"x".join([r"(\d+)"] * ndim) + r"\s*", arg)
        if not m:
            raise ParameterError(
                f"cluster {spec!r}: tpu-{generation} takes a {ndim}-D shape {shape} such as "
                f"{example}, got {arg!r}"
            )
        dims = [int(x) for x in m.groups()]
        if min(dims) < 1:
            raise ParameterError(f"cluster {spec!r}: every dimension must be >= 1, got {arg!r}")
        chips = math.prod(dims)
        per_host = min(chips_per_host, chips) if small_slices else chips_per_host
        if chips % per_host:
            raise ParameterError(
                f"cluster {spec!r}: the shape must hold a multiple of {chips_per_host} chips "
                f"({chips_per_host} per host), got {chips}"
            )
        return {
            "name": spec,
            "nodes": chips // per_host,
            "gpus_per_node": per_host,
            "reduction": reduction,
            "inter": {"kind": "ici", "bandwidth": ici, "latency": "1us"},
            "topology": {"kind": "torus", "dims": dims, "wrap": wraps(dims)},
            "sources": f"docs/clusters.md#tpu-{generation}",
        }

    preset.__doc__ = (
        f"TPU {generation}: chips on a {ndim}-D torus of ICI links ({ici} per link), "
        f"{chips_per_host} chips per host."
    )
    return preset


def _cube_wraps(dims: list[int]) -> list[bool]:
    """v4 and v5p: slices of a full cube (64 chips) or more wrap around every dimension whose
    size is a multiple of 4 (the cube's side); smaller slices are meshes."""
    return [math.prod(dims) >= 64 and d % 4 == 0 for d in dims]


def _pod_axis_wraps(dims: list[int]) -> list[bool]:
    """v5e and v6e: an axis wraps around where it spans the pod's 16 chips."""
    return [d == 16 for d in dims]


# Cloud TPU v4: 6 ICI links per chip, 45 GB/s each (1.1 PB/s all-reduce per 4,096-chip pod)
_tpu_v4 = _tpu("v4", ndim=3, chips_per_host=4, ici="45GB/s", reduction="400GB/s", wraps=_cube_wraps)
# Cloud TPU v5p: 1,200 GB/s bidirectional ICI per chip over 6 links
_tpu_v5p = _tpu(
    "v5p", ndim=3, chips_per_host=4, ici="100GB/s", reduction="920GB/s", wraps=_cube_wraps
)
# Cloud TPU v5e and v6e (Trillium): 4 ICI ports per chip, 400 / 800 GB/s bidirectional
_tpu_v5e = _tpu(
    "v5e",
    ndim=2,
    chips_per_host=8,
    ici="50GB/s",
    reduction="273GB/s",
    wraps=_pod_axis_wraps,
    small_slices=True,
)
_tpu_v6e = _tpu(
    "v6e",
    ndim=2,
    chips_per_host=8,
    ici="100GB/s",
    reduction="546GB/s",
    wraps=_pod_axis_wraps,
    small_slices=True,
)


def _gpu_subset(spec: str, arg: str) -> tuple[list[int], bool]:
    """``all``, ``0-7``, ``0,1,2,3``, ``gpus=0-3,6`` (optionally ``:nvlink``, NVLink only):
    the sorted GPUs of a DGX-1 and whether PCIe is kept; one line for anything else."""
    text, _, mode = arg.strip().partition(":")
    if mode.strip() not in ("", "nvlink"):
        raise ParameterError(
            f"cluster {spec!r}: after the GPUs, only ':nvlink' (NVLink only) is accepted, "
            f"got {mode!r}"
        )
    text = text.strip().removeprefix("gpus=").strip()
    if text == "all":
        return list(range(8)), not mode
    gpus: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ParameterError(
                f"cluster {spec!r}: give GPUs as all, a range 0-3 or a list 0,1,2,3, got {arg!r}"
            )
        lo = int(m.group(1))
        gpus.update(range(lo, int(m.group(2) or lo) + 1))
    outside = sorted(g for g in gpus if g > 7)
    if outside:
        raise ParameterError(
            f"cluster {spec!r}: a DGX-1 has GPUs 0..7, got GPU {outside[0]} (use a subset of 0-7)"
        )
    return sorted(gpus), not mode


def _dgx1_v100(spec: str, arg: str) -> dict[str, Any]:
    """DGX-1 (V100): 8 GPUs on a hybrid cube-mesh of NVLink 2.0 links (25 GB/s each, some pairs
    two), PCIe between the others; a GPU subset for a partial allocation."""
    gpus, pcie = _gpu_subset(spec, arg)
    return {
        "name": spec,
        "nodes": 1,
        "gpus_per_node": len(gpus),
        "reduction": "300GB/s",
        "intra": {"kind": "nvlink", "bandwidth": "25GB/s", "latency": "0.7us"},
        "inter": {"kind": "pcie", "bandwidth": "15.75GB/s", "latency": "1us"},
        "topology": {"kind": "hybrid_cube_mesh", "gpus": gpus, "pcie": pcie},
        "sources": "docs/clusters.md#dgx1-v100",
    }


def _dragonfly(spec: str, arg: str) -> dict[str, Any]:
    """A Slingshot-like dragonfly: 200 Gb/s, 64-port switches (16 hosts, 31 local, 16 global)."""
    groups = _count(spec, arg, "the number of dragonfly groups")
    if groups > MAX_DRAGONFLY_GROUPS:
        raise ParameterError(
            f"cluster {spec!r}: at most {MAX_DRAGONFLY_GROUPS} groups (32 routers of 16 global "
            f"links each join at most 32 x 16 = 512 other groups)"
        )
    return {
        "name": spec,
        "nodes": groups * 32 * 16 // 4,
        "gpus_per_node": 4,
        "reduction": "1.07TB/s",
        "intra": {"kind": "xgmi", "bandwidth": "50GB/s", "latency": "1us"},
        "inter": {"kind": "host", "bandwidth": "200Gb/s", "latency": "1us"},
        "topology": {
            "kind": "dragonfly",
            "groups": groups,
            "routers_per_group": 32,
            "hosts_per_router": 16,
            "global_links_per_router": 16,
        },
        "sources": "docs/clusters.md#dragonfly",
    }


def _ethernet(spec: str, arg: str) -> dict[str, Any]:
    """A commodity cluster: one 100 GbE port per server, 2:1 oversubscribed leaf-spine."""
    return {
        "name": spec,
        "nodes": _count(spec, arg, "the number of servers"),
        "gpus_per_node": 1,
        "inter": {"kind": "host", "bandwidth": "100Gb/s", "latency": "2us"},
        "topology": {
            "kind": "fat_tree",
            "hosts_per_leaf": 32,
            "oversubscription": 2,
            "routing": "ecmp",
        },
        "sources": "docs/clusters.md#ethernet",
    }


#: Preset names and their argument, for help and errors.
PRESETS: dict[str, tuple[str, Callable[[str, str], dict[str, Any]]]] = {
    "dgx-h100": ("N nodes (8 H100 each)", _dgx_h100),
    "dgx-h200": ("N nodes (8 H200 each)", _dgx_h200),
    "dgx-b200": ("N nodes (8 B200 each)", _dgx_b200),
    "dgx-a100": ("N nodes (8 A100 each)", _dgx_a100),
    "gb200-nvl72": ("N racks (72 GPUs each)", _gb200_nvl72),
    "tpu-v4": ("AxBxC chips (4 per host)", _tpu_v4),
    "tpu-v5p": ("AxBxC chips (4 per host)", _tpu_v5p),
    "dgx1-v100": ("GPUS of one DGX-1: all, 0-3 or 0,1,2,3 (:nvlink: NVLink only)", _dgx1_v100),
    "tpu-v5e": ("AxB chips (8 per host)", _tpu_v5e),
    "tpu-v6e": ("AxB chips (8 per host)", _tpu_v6e),
    "dragonfly": ("G groups (512 NICs each)", _dragonfly),
    "ethernet": ("N servers", _ethernet),
}


def load_cluster(path: str | Path) -> Cluster:
    """A cluster from a TOML file (the format of :mod:`commsim.clusters._build`)."""
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"cluster file {path}: no such file")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ParameterError(f"cluster file {path}: cannot read it ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ParameterError(f"cluster file {path}: not valid TOML ({e})") from None
    return build_cluster(data, path.name, path.parent)


def cluster(spec: str | Path) -> Cluster:
    """The cluster a preset (``"dgx-h100:128"``) or a TOML file (``"mine.toml"``) describes
    (:func:`commsim.clusters.cluster` also takes one with fields changed,
    :class:`~commsim.clusters.Edited`).

    Examples:
        >>> c = cluster("dgx-h100:4")
        >>> c.ngpus, c.ranks_per_node, sorted(c.link_classes)
        (32, 8, ['nvlink', 'rail'])
    """
    text = str(spec).strip()
    if text.endswith(".toml") or Path(text).is_file():
        return load_cluster(text)
    name, colon, arg = text.partition(":")
    entry = PRESETS.get(name.strip().lower())
    if entry is None:
        key = name.strip().lower()
        close = [k for k in PRESETS if key and k.startswith(key)] or difflib.get_close_matches(
            key, PRESETS, n=3
        )
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        known = ", ".join(f"{k}:{v[0].split()[0]}" for k, v in PRESETS.items())
        raise UnknownNameError(
            f"unknown cluster {name!r}{hint} (presets: {known}; or a .toml file)"
        )
    if not colon:
        raise ParameterError(
            f"cluster {text!r}: give its size, {name}:{entry[0].split()[0]} ({entry[0]})"
        )
    return build_cluster(entry[1](text, arg), text)
