r"""Parse MSCCL-IR XML into plain records, checking every element and attribute.

MSCCL-IR is the algorithm format of Microsoft's MSCCL: the MSCCLang compiler (``msccl-tools``,
``ir_to_xml`` in ``msccl/language/ir.py``) writes it and the MSCCL executor
(``Azure/msccl-executor-nccl``, ``src/misc/msccl/msccl_parser.cc``) runs it::

    <algo name proto nchannels nchunksperloop ngpus coll inplace [outofplace minBytes maxBytes]>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps [hasdep]/>

Offsets and counts are in chunks (``nchunksperloop`` of them make one loop's buffer). This module
only reads: it turns the text into :class:`Algo` / :class:`Gpu` / :class:`Tb` / :class:`Op` records
and rejects, with one line naming the element and the attribute, anything malformed: a file past
:data:`MAX_BYTES` (refused before parsing), text that is not XML or declares a DTD (entity
expansion), a wrong root, a missing or non-integer attribute, ids that are not contiguous from 0,
steps ``s`` that are not ``0, 1, ...``, buffer ranges outside the buffer, a dependency on a thread
block or step that does not exist. What the steps *mean* is :mod:`._msccl_read`'s job.

Both attribute sets load: the current executor's (with ``outofplace``, ``minBytes``, ``maxBytes``)
and the older one without them. ``coll`` accepts both spellings (``reducescatter`` and
``reduce_scatter``, ...): :data:`COLLECTIVE_NAMES` maps them to commsim's names.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.parsers import expat

from commsim.errors import ResourceError, ScheduleError
from commsim.units import format_size

__all__ = [
    "COLLECTIVE_NAMES",
    "MAX_BYTES",
    "STEP_TYPES",
    "Algo",
    "Gpu",
    "Op",
    "Tb",
    "parse",
    "too_large",
]

#: Largest file read (before parsing): real MSCCL-IR files are kilobytes to a few megabytes
#: (the executor caps thread blocks at 64 steps); importing one of 16 MiB takes about 20 s.
MAX_BYTES = 16 * 2**20

#: ``coll`` as MSCCL runtimes spell it -> commsim's collective name.
COLLECTIVE_NAMES: dict[str, str] = {
    "allreduce": "allreduce",
    "all_reduce": "allreduce",
    "reducescatter": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "allgather": "allgather",
    "all_gather": "allgather",
    "alltoall": "alltoall",
    "all_to_all": "alltoall",
    "broadcast": "broadcast",
    "reduce": "reduce",
}

#: Step types and which local ranges they use: (reads ``src``, writes ``dst``, receives, sends).
STEP_TYPES: dict[str, tuple[bool, bool, bool, bool]] = {
    "s": (True, False, False, True),
    "r": (False, True, True, False),
    "rcs": (False, True, True, True),
    "rrs": (True, False, True, True),
    "rrc": (True, True, True, False),
    "rrcs": (True, True, True, True),
    "cpy": (True, True, False, False),
    "re": (True, True, False, False),
    "nop": (False, False, False, False),
}
_BUFFERS = ("i", "o", "s")
_INT_MAX = 2**31 - 1  # the executor's parser reads every attribute as an int


@dataclasses.dataclass(frozen=True, eq=False)  # each step is its own: hashed by identity
class Op:
    """One ``<step>``: ``gpu``, ``tb`` and ``s`` locate it in the file."""

    gpu: int
    tb: int
    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int

    @property
    def where(self) -> str:
        return f"gpu {self.gpu} tb {self.tb} step {self.s} ({self.type})"


@dataclasses.dataclass(frozen=True)
class Tb:
    """One ``<tb>``: its send and receive peers (-1: none), channel and steps in order."""

    id: int
    send: int
    recv: int
    chan: int
    ops: tuple[Op, ...]


@dataclasses.dataclass(frozen=True)
class Gpu:
    """One ``<gpu>``: buffer sizes in chunks and its thread blocks."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[Tb, ...]


@dataclasses.dataclass(frozen=True)
class Algo:
    """The ``<algo>`` element: ``collective`` is commsim's name for ``coll``."""

    name: str
    proto: str
    collective: str
    nchunks: int  # nchunksperloop
    inplace: bool
    nchannels: int
    gpus: tuple[Gpu, ...]
    source: str  # the file's name, or "<text>", for messages


def _read(source: str | os.PathLike[str] | bytes) -> tuple[bytes, str]:
    """The XML bytes and a name for messages; text is anything starting with ``<``."""
    if isinstance(source, bytes):
        text, name = source, "<text>"
    elif isinstance(source, str) and source.lstrip().startswith("<"):
        if len(source) > MAX_BYTES:  # refused before encoding it (a character is >= 1 byte)
            raise ResourceError(too_large("<text>", len(source)))
        text, name = source.encode(), "<text>"
    else:
        path = Path(source)
        name = str(path)
        try:
            info = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise ScheduleError(f"{name}: no such file") from None
        except (OSError, ValueError) as e:
            raise ScheduleError(
                f"{name}: cannot read ({getattr(e, 'strerror', None) or e})"
            ) from None
        if not stat.S_ISREG(info.st_mode):
            raise ScheduleError(f"{name}: not a regular file, not an MSCCL-IR algorithm")
        if info.st_size > MAX_BYTES:
            raise ResourceError(too_large(name, info.st_size))
        try:
            with path.open("rb") as f:
                text = f.read(MAX_BYTES + 1)  # no more than allowed, whatever stat said
        except OSError as e:
            raise ScheduleError(f"{name}: cannot read ({e.strerror or e})") from None
    if len(text) > MAX_BYTES:
        raise ResourceError(too_large(name, len(text)))
    return text, name


def too_large(name: str, size: int) -> str:
    return (
        f"{name}: {format_size(size)} is too large for an MSCCL-IR file "
        f"(the limit is {format_size(MAX_BYTES)})"
    )


def _int(el: ET.Element, attr: str, where: str, lo: int = 0) -> int:
    value = el.get(attr)
    if value is None:
        raise ScheduleError(f"{where}: <{el.tag}> has no attribute {attr!r}")
    try:
        n = int(value)
    except ValueError:
        raise ScheduleError(f"{where}: <{el.tag}> {attr}={value!r:.40} is not an integer") from None
    if n < lo:
        raise ScheduleError(f"{where}: <{el.tag}> {attr}={n} must be >= {lo}")
    if n > _INT_MAX:
        raise ScheduleError(
            f"{where}: <{el.tag}> {attr}={value:.40} is past the 32-bit integers MSCCL-IR uses"
        )
    return n


def _children(el: ET.Element, tag: str, where: str) -> list[ET.Element]:
    for child in el:
        if child.tag != tag:
            raise ScheduleError(f"{where}: unexpected <{child.tag}> inside <{el.tag}>")
    return list(el)


def _contiguous(items: list[ET.Element], attr: str, where: str) -> list[ET.Element]:
    """The elements ordered by ``attr``, which must be exactly ``0, 1, ..., n - 1``."""
    keyed = sorted((_int(e, attr, where), k) for k, e in enumerate(items))
    for want, (got, _) in enumerate(keyed):
        if got != want:
            span = "be 0" if len(items) == 1 else f"run from 0 to {len(items) - 1}"
            fault = f"{attr}={want} is missing" if got > want else f"{attr}={got} is repeated"
            raise ScheduleError(
                f"{where}: the <{items[0].tag}> {attr} values must {span}, each once; {fault}"
            )
    return [items[k] for _, k in keyed]


def parse(source: str | os.PathLike[str] | bytes) -> Algo:
    """Read and check an MSCCL-IR file (a path, or the XML text itself)."""
    text, name = _read(source)
    head = text[:4096].upper()
    if b"<!DOCTYPE" in head or b"<!ENTITY" in text.upper():
        raise ScheduleError(f"{name}: declares a DTD or entities, which MSCCL-IR files never do")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        line, col = e.position
        why = expat.ErrorString(e.code)
        raise ScheduleError(f"{name}: not XML (line {line}, column {col}: {why})") from None
    if root.tag != "algo":
        raise ScheduleError(
            f"{name}: the root element is <{root.tag}>, an MSCCL-IR file's is <algo>"
        )
    where = f"{name}: <algo>"
    coll = root.get("coll")
    if coll is None:
        raise ScheduleError(f"{where} has no attribute 'coll'")
    if coll not in COLLECTIVE_NAMES:
        raise ScheduleError(
            f"{where} coll={coll!r:.40} is not a collective commsim knows "
            f"(known: {', '.join(COLLECTIVE_NAMES)})"
        )
    ngpus = _int(root, "ngpus", name, 1)
    nchunks = _int(root, "nchunksperloop", name, 1)
    inplace = _int(root, "inplace", name)
    if inplace > 1:
        raise ScheduleError(f"{where} inplace={inplace} must be 0 or 1")
    for optional in ("outofplace", "minBytes", "maxBytes"):  # the current executor's extras
        if root.get(optional) is not None:
            _int(root, optional, name)
    nchannels = _int(root, "nchannels", name, 1) if root.get("nchannels") is not None else 1
    gpu_els = _contiguous(_children(root, "gpu", name), "id", name)
    if len(gpu_els) != ngpus:
        raise ScheduleError(f"{where} ngpus={ngpus} but the file has {len(gpu_els)} <gpu> elements")
    gpus = tuple(_gpu(el, ngpus, nchunks, f"{name}: gpu {g}") for g, el in enumerate(gpu_els))
    return Algo(
        name=root.get("name", "msccl"),
        proto=root.get("proto", "Simple"),
        collective=COLLECTIVE_NAMES[coll],
        nchunks=nchunks,
        inplace=bool(inplace),
        nchannels=nchannels,
        gpus=gpus,
        source=name,
    )


def _gpu(el: ET.Element, ngpus: int, nchunks: int, where: str) -> Gpu:
    g = _int(el, "id", where)
    sizes = [_int(el, f"{b}_chunks", where) for b in _BUFFERS]
    tb_els = _contiguous(_children(el, "tb", where), "id", where)
    tbs = []
    for k, tb in enumerate(tb_els):
        at = f"{where} tb {k}"
        send, recv = _int(tb, "send", at, -1), _int(tb, "recv", at, -1)
        for attr, peer in (("send", send), ("recv", recv)):
            if peer >= ngpus or peer == g:
                raise ScheduleError(
                    f"{at}: <tb> {attr}={peer} must be another gpu in [0, {ngpus}) or -1"
                )
        chan = _int(tb, "chan", at)
        steps = _contiguous(_children(tb, "step", at), "s", at)
        ops = tuple(_op(st, g, k, s, at) for s, st in enumerate(steps))
        tbs.append(Tb(k, send, recv, chan, ops))
    for tb in tbs:
        for op in tb.ops:
            _check_op(op, tb, tbs, where)
    return Gpu(g, *sizes, tuple(tbs))


def _op(el: ET.Element, g: int, tb: int, s: int, where: str) -> Op:
    at = f"{where} step {s}"
    kind = el.get("type")
    if kind not in STEP_TYPES:
        raise ScheduleError(f"{at}: <step> type={kind!r:.20} is not one of {', '.join(STEP_TYPES)}")
    reads, writes, _, _ = STEP_TYPES[kind]
    bufs = {}
    for attr, used in (("srcbuf", reads), ("dstbuf", writes)):
        b = el.get(attr)
        if b is None:
            raise ScheduleError(f"{at}: <step> has no attribute {attr!r}")
        if used and b not in _BUFFERS:
            raise ScheduleError(f"{at}: <step> {attr}={b!r:.20} must be i, o or s")
        bufs[attr] = b
    return Op(
        gpu=g,
        tb=tb,
        s=s,
        type=kind,
        srcbuf=bufs["srcbuf"],
        srcoff=_int(el, "srcoff", at, 0 if reads else -1),
        dstbuf=bufs["dstbuf"],
        dstoff=_int(el, "dstoff", at, 0 if writes else -1),
        cnt=_int(el, "cnt", at, 0 if kind == "nop" else 1),
        depid=_int(el, "depid", at, -1),
        deps=_int(el, "deps", at, -1),
    )


def _check_op(op: Op, tb: Tb, tbs: list[Tb], where: str) -> None:
    """Peers the step needs, and a dependency that names an existing, other thread block."""
    at = f"{where} tb {op.tb} step {op.s}"
    _, _, receives, sends = STEP_TYPES[op.type]
    if receives and tb.recv < 0:
        raise ScheduleError(f"{at}: <step> type={op.type!r} receives, but its <tb> has recv=-1")
    if sends and tb.send < 0:
        raise ScheduleError(f"{at}: <step> type={op.type!r} sends, but its <tb> has send=-1")
    if (op.depid < 0) != (op.deps < 0):
        raise ScheduleError(
            f"{at}: <step> depid={op.depid} deps={op.deps}: both must be -1 or both set"
        )
    if op.depid >= 0:
        if op.depid >= len(tbs):
            raise ScheduleError(
                f"{at}: <step> depid={op.depid}: the gpu has no tb {op.depid} (it has {len(tbs)})"
            )
        if op.deps >= len(tbs[op.depid].ops):
            raise ScheduleError(
                f"{at}: <step> deps={op.deps}: tb {op.depid} has only "
                f"{len(tbs[op.depid].ops)} steps"
            )
        if op.depid == op.tb and op.deps >= op.s:
            raise ScheduleError(
                f"{at}: <step> depid={op.depid} deps={op.deps} waits for its own or a later step "
                "of its thread block (a deadlock)"
            )
