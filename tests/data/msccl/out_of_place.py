"""Out-of-place ring programs in MSCCLang, for commsim's MSCCL-IR import tests.

msccl-tools' examples are all in place (or alltoall); these two keep the input untouched and work
in the output buffer, so the importer's out-of-place mapping (``o`` in scratch plus a final copy)
is exercised on compiler output. Run with msccl-tools installed (see README.md):

    python out_of_place.py allreduce 4 --protocol=LL > allreduce_ring_oop_4_LL.xml
    python out_of_place.py allgather 4 --protocol=Simple > allgather_ring_oop_4_Simple.xml
"""

import argparse

from msccl.language import XML, Buffer, Check, MSCCLProgram, ThreadblockPolicy, chunk
from msccl.language.collectives import AllGather, AllReduce
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("collective", choices=["allreduce", "allgather"])
    parser.add_argument("gpus", type=int)
    parser.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    args = parser.parse_args()
    make = {"allreduce": allreduce_ring_out_of_place, "allgather": allgather_ring_out_of_place}
    make[args.collective](args.gpus, args.protocol)
