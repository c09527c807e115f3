r"""The link-port rule: a rank drives each of its host's links at once, each link its own queue.

Under the default rule (``port_rule="channel"``) a port, one per ``(rank, channel)`` (IR rule 6),
sends one and receives one message per round (:func:`commsim._messages.matchings`), so the messages
a rank sends in one step on one channel go one after another even when they leave by different
links of its host. Real hosts drive their links at once: an H100 drives its 18 NVLink 4 links and
its NIC together (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022: "18 fourth-generation
NVLink links", 900 GB/s in all), NCCL's PXN moves data over NVLink to the GPU on the destination's
rail while the NICs send (NCCL 2.12, NVIDIA's "Doubling all2all performance with NCCL 2.12" post,
2022), and a TPU v4 chip drives its six ICI links concurrently (Jouppi et al., "TPU v4: An
Optically Reconfigurable Supercomputer for Machine Learning with Hardware Support for Embeddings",
ISCA 2023); a DGX-1 V100 drives its six NVLink 2 links.

Under ``port_rule="link"`` every port has one **queue per link of its host**: a virtual port
:math:`v = \text{port} \cdot D + \text{slot}` (:func:`link_queue_messages`, ``D`` the most links
of any placed endpoint, :func:`link_queues`), which sends by the host's link number ``slot``
(the first link of the message's route, :math:`\ell_1(m)`) and receives by link number ``slot``
(the last link, :math:`\ell_\text{last}(m)`); links are numbered per node in the order of
:class:`~commsim.topology.Network`'s adjacency (:func:`host_link_slots`), so a link's two
directions to one neighbour share a number, and a queue is full duplex as a port is. Each queue
keeps its own clock within a step: a message :math:`m` starts at
:math:`s = \max(c_{v_1(m)}, c_{v_\text{last}(m)})`, the clocks of its sender's queue on
:math:`\ell_1(m)` and its receiver's queue on :math:`\ell_\text{last}(m)`, and messages of one
queue go one after another (:func:`commsim._messages.matchings` of the virtual ports). At the
end of every step the queues of a port meet: each takes the latest clock of them all, so
program order per channel (IR rule 3) is unchanged: the next step on the channel starts when
all of this step's messages, on every link, are done. A step in which a GPU sends 8 messages
over NVLink and one over its NIC takes :math:`\max(8\,t_\text{NVLink}, t_\text{NIC})`, not
:math:`t_\text{NIC} + 7\,t_\text{NVLink}`. A host with one link (one NIC behind a switch) has
one queue per port, so every number is the default rule's.

See Also:
    :class:`commsim.models.Topology` (``port_rule``), docs/sharp-bits.md ("Ports and links"),
    docs/benchmarks.md ("Link ports").

References:
    NVIDIA, *H100 Tensor Core GPU Architecture* (whitepaper, 2022). N. P. Jouppi et al.,
    *TPU v4*, ISCA 2023. NVIDIA, *Doubling all2all Performance with NCCL 2.12* (2022).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from commsim._messages import Messages, link_matchings, messages, on_ports

if TYPE_CHECKING:
    from commsim._ir import Schedule, Step
    from commsim.topology import Network

__all__ = [
    "PORT_RULES",
    "host_link_slots",
    "link_queue_messages",
    "link_queues",
]

#: ``"channel"``: one port per (rank, channel), one message each way per round (the default);
#: ``"link"``: one queue per (rank, channel, host link), the queues meeting at each step's end.
PORT_RULES = ("channel", "link")


def host_link_slots(network: Network) -> tuple[np.ndarray, np.ndarray]:
    """Per directed link, its number among the links leaving its source node and among those
    entering its destination node (``0 .. degree - 1``).

    Examples:
        >>> import networkx as nx
        >>> from commsim.topology import Network
        >>> g = nx.star_graph(2)  # node 0 joined to nodes 1 and 2
        >>> nx.set_edge_attributes(g, 1e9, "bandwidth")
        >>> out_slot, in_slot = host_link_slots(Network(g))
        >>> sorted(out_slot[Network(g).link_src == 0].tolist())  # node 0 leaves by two links
        [0, 1]
    """
    cached = network.__dict__.get("_link_slots")
    if cached is not None:
        return cached
    n = network.nlinks
    out_slot = np.empty(n, dtype=np.int64)
    in_slot = np.empty(n, dtype=np.int64)
    for ends, slot in ((network.link_src, out_slot), (network.link_dst, in_slot)):
        order = np.argsort(ends, kind="stable")
        first = np.searchsorted(ends[order], ends[order])  # where each node's run starts
        slot[order] = np.arange(n) - first
    network.__dict__["_link_slots"] = (out_slot, in_slot)
    return out_slot, in_slot


def link_queues(network: Network, hosts: np.ndarray) -> int:
    """The queues per port under the link-port rule: the most links (leaving or entering) of
    any endpoint in ``hosts`` (each rank's endpoint, :meth:`Topology.hosts_of
    <commsim.models.Topology.hosts_of>`), at least 1.

    Examples:
        >>> from commsim.topology import Network, switch, torus
        >>> (
        ...     link_queues(Network(torus((4, 4))), np.arange(16)),
        ...     link_queues(Network(switch(4)), np.arange(4)),
        ... )
        (4, 1)
    """
    if len(hosts) == 0:
        return 1
    nodes = network.endpoints[np.unique(hosts)]
    out_deg = np.diff(network.out_indptr)[nodes]
    in_deg = np.diff(network.in_indptr)[nodes]
    return max(1, int(max(out_deg.max(), in_deg.max())))


def link_queue_messages(
    step: Step, schedule: Schedule, ports: int, network: Network, hosts: np.ndarray, queues: int
) -> tuple[Messages, list[np.ndarray]]:
    """``step``'s messages under the link-port rule: senders and receivers renamed to their
    link queues (``port · queues + slot``, the module docstring; ``queues``:
    :func:`link_queues`), local reducers to their port's first queue, and the rounds
    :func:`~commsim._messages.link_matchings` finds, in which a queue sends one and receives one
    message (the order of each queue's messages; a message waits only for its own two
    queues).

    Examples:
        >>> from commsim._ir import Schedule, Step
        >>> from commsim.topology import Network, torus
        >>> st = Step.make([0, 0], [1, 2], [0, 0], [0, 0])  # rank 0 sends to ranks 1 and 2
        >>> s = Schedule.from_steps([st], collective="broadcast", nranks=3, nslots=1)
        >>> msg, rounds = link_queue_messages(st, s, 1, Network(torus((3,))), np.arange(3), 2)
        >>> msg.src.tolist(), len(rounds)  # rank 0's two queues, one message each
        ([0, 1], 1)
    """
    msg = messages(step, schedule)
    rank_src, rank_dst = msg.src, msg.dst
    msg = on_ports(msg, ports)
    if not len(msg.src):
        return msg._replace(local_rank=msg.local_rank * queues), []
    indptr, links = network.routes(hosts[rank_src], hosts[rank_dst])
    out_slot, in_slot = host_link_slots(network)
    first, last = out_slot[links[indptr[:-1]]], in_slot[links[indptr[1:] - 1]]
    rounds = (
        [np.arange(len(msg.src))]
        if msg.unique_ports
        else link_matchings(msg.src, msg.dst, schedule.nranks * ports, first, last)
    )
    renamed = msg._replace(
        src=msg.src * queues + first, dst=msg.dst * queues + last,
        local_rank=msg.local_rank * queues,
    )  # fmt: skip
    return renamed, rounds
