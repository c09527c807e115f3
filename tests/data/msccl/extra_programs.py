"""MSCCLang programs for the buffer mappings msccl-tools' examples do not reach.

Its examples are in place, except alltoall, which is out of place. For commsim's MSCCL-IR import
tests, two out-of-place rings (they keep the input untouched and work in the output buffer: the
importer puts ``o`` in scratch and copies it out at the end) and an in-place alltoall (``o = i``:
the importer copies the buffer to the output half at the end), and a broadcast from root 2 (the
file does not say the root; the importer infers it). Run with msccl-tools installed
(see README.md); each prints the XML:

    python extra_programs.py allreduce 4 --protocol=LL
    python extra_programs.py allgather 4 --protocol=Simple
    python extra_programs.py alltoall 4 --protocol=LL128
    python extra_programs.py broadcast 4 --protocol=Simple
"""

import argparse

from msccl.language import XML, Buffer, Check, MSCCLProgram, ThreadblockPolicy, chunk
from msccl.language.collectives import AllGather, AllReduce, AllToAll, Broadcast
from msccl.topologies import fully_connected


def allreduce_ring_out_of_place(p: int, protocol: str) -> None:
    """Copy the input into the output, then reduce around the ring and propagate, in the output."""
    with MSCCLProgram(
        "allreduce_ring_out_of_place",
        fully_connected(p),
        AllReduce(p, p, False),
        1,
        protocol=protocol,
        threadblock_policy=ThreadblockPolicy.manual,
    ):
        for r in range(p):
            for j in range(p):
                chunk(r, Buffer.input, j).copy(r, Buffer.output, j, sendtb=0)
        for hop in range(p - 1):
            for j in range(p):
                src, dst = (j + hop) % p, (j + hop + 1) % p
                chunk(dst, Buffer.output, j).reduce(
                    chunk(src, Buffer.output, j), ch=0, sendtb=0, recvtb=0
                )
        for hop in range(-1, p - 2):
            for j in range(p):
                src, dst = (j + hop) % p, (j + hop + 1) % p
                chunk(src, Buffer.output, j).copy(dst, Buffer.output, j, ch=0, sendtb=0, recvtb=0)
        XML()
        Check()


def allgather_ring_out_of_place(p: int, protocol: str) -> None:
    """Each rank copies its input block into its output, then the blocks travel the ring."""
    with MSCCLProgram(
        "allgather_ring_out_of_place",
        fully_connected(p),
        AllGather(p, 1, False),
        1,
        protocol=protocol,
        threadblock_policy=ThreadblockPolicy.manual,
    ):
        for r in range(p):
            chunk(r, Buffer.input, 0).copy(r, Buffer.output, r, sendtb=0)
        for hop in range(p - 1):
            for j in range(p):
                src, dst = (j + hop) % p, (j + hop + 1) % p
                chunk(src, Buffer.output, j).copy(dst, Buffer.output, j, ch=0, sendtb=0, recvtb=0)
        XML()
        Check()


def alltoall_in_place(p: int, protocol: str) -> None:
    """Every block goes to its rank's scratch, then each rank copies its scratch into place."""
    with MSCCLProgram(
        "alltoall_in_place",
        fully_connected(p),
        AllToAll(p, 1, True),
        1,
        protocol=protocol,
        threadblock_policy=ThreadblockPolicy.manual,
    ):
        for r in range(p):
            for q in range(p):
                if q != r:
                    chunk(r, Buffer.input, q).copy(q, "scratch", r, sendtb=q, recvtb=r, ch=0)
        for q in range(p):
            for r in range(p):
                if r != q:
                    chunk(q, "scratch", r).copy(q, Buffer.output, r, sendtb=r)
        XML()
        Check()


def broadcast_chain(p: int, protocol: str, root: int = 2) -> None:
    """The root's p chunks travel a chain root, root + 1, ..., pipelined chunk by chunk."""
    with MSCCLProgram(
        "broadcast_chain",
        fully_connected(p),
        Broadcast(p, p, True, root),
        1,
        protocol=protocol,
        threadblock_policy=ThreadblockPolicy.manual,
    ):
        for j in range(p):
            for hop in range(p - 1):
                src, dst = (root + hop) % p, (root + hop + 1) % p
                chunk(src, Buffer.input, j).copy(dst, Buffer.input, j, ch=0, sendtb=0, recvtb=0)
        XML()
        Check()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("collective", choices=["allreduce", "allgather", "alltoall", "broadcast"])
    parser.add_argument("gpus", type=int)
    parser.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    args = parser.parse_args()
    make = {
        "allreduce": allreduce_ring_out_of_place,
        "allgather": allgather_ring_out_of_place,
        "alltoall": alltoall_in_place,
        "broadcast": broadcast_chain,
    }
    make[args.collective](args.gpus, args.protocol)
