r"""The link-port rule: a rank drives each of its host's links at once.

Under the default rule (``port_rule="channel"``) a port, one per ``(rank, channel)`` (IR rule 6),
sends one and receives one message per round (:func:`commsim._messages.matchings`), so the messages
a rank sends in one step on one channel go one after another even when they leave by different
links of its host. Real hosts drive their links at once: an H100 drives its 18 NVLink 4 links and
its NIC together (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022: "18 fourth-generation
NVLink links", 900 GB/s in all), NCCL's PXN moves data over NVLink to the GPU on the destination's
rail while the NICs send (NCCL 2.12, NVIDIA's "Doubling all2all performance with NCCL 2.12" post,
2022), and a TPU v4 chip drives its six ICI links concurrently (Jouppi et al., "TPU v4: An
Optically Reconfigurable Supercomputer for Machine Learning with Hardware Support for Embeddings",
ISCA 2023); a DGX-1 V100 drives its six NVLink 2 links. Under ``port_rule="link"`` a round holds,
per port, at most one message per first-hop link of the sender's host and at most one per last-hop
link of the receiver's host (:func:`commsim._messages.link_matchings`):

.. math::

    \text{round } R:\quad |\{m \in R : \text{port}(m) = q,\ \ell_1(m) = l\}| \le 1, \qquad
    |\{m \in R : \text{port}'(m) = r,\ \ell_\text{last}(m) = l\}| \le 1,

where :math:`\ell_1(m)` is the first link of message :math:`m`'s route and
:math:`\ell_\text{last}(m)` its last. A round's messages are in flight together and share links
through the contention mode, as any round's do; each starts at
:math:`s = \max(c_q, c_r)` and the port's clock becomes the latest end of its messages, so program
order per channel (IR rule 3) is unchanged: the next step on the channel starts when all of this
step's messages are done. A host with one link (one NIC behind a switch) has one slot, so the
rounds, and every number, are those of the default rule.

Links are numbered per host (``0 .. degree - 1``, in the order of
:class:`~commsim.topology.Network`'s adjacency), so the virtual ports of
:func:`~commsim._messages.link_matchings` keep the shift structure of the ranks (a ring's rounds
stay one shift class).

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

__all__ = ["PORT_RULES", "host_link_slots", "link_port_messages"]

#: ``"channel"``: one port per (rank, channel), one message each way per round (the default);
#: ``"link"``: one message each way per round per (rank, channel, host link).
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


def link_port_messages(
    step: Step, schedule: Schedule, ports: int, network: Network, hosts: np.ndarray
) -> tuple[Messages, list[np.ndarray]]:
    """``step``'s messages on ``ports`` ports per rank and their rounds under the link-port rule:
    as :func:`commsim._messages.port_messages`, with rounds from
    :func:`~commsim._messages.link_matchings` of each message's first- and last-hop links on
    ``network`` (``hosts``: each rank's endpoint, :meth:`Topology.hosts_of
    <commsim.models.Topology.hosts_of>`).

    Examples:
        >>> from commsim._ir import Schedule, Step
        >>> from commsim.topology import Network, switch, torus
        >>> st = Step.make([0, 0], [1, 2], [0, 0], [0, 0])  # rank 0 sends to ranks 1 and 2
        >>> s = Schedule.from_steps([st], collective="broadcast", nranks=3, nslots=1)
        >>> hosts = np.arange(3)
        >>> len(link_port_messages(st, s, 1, Network(torus((3,))), hosts)[1])  # two links
        1
        >>> len(link_port_messages(st, s, 1, Network(switch(3)), hosts)[1])  # one link
        2
    """
    msg = messages(step, schedule)
    rank_src, rank_dst = msg.src, msg.dst
    msg = on_ports(msg, ports)
    if msg.unique_ports:
        return msg, [np.arange(len(msg.src))]
    indptr, links = network.routes(hosts[rank_src], hosts[rank_dst])
    out_slot, in_slot = host_link_slots(network)
    first = links[indptr[:-1]]
    last = links[indptr[1:] - 1]
    rounds = link_matchings(
        msg.src, msg.dst, schedule.nranks * ports, out_slot[first], in_slot[last]
    )
    return msg, rounds
