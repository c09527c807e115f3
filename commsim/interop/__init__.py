"""Interoperability: schedules to and from other tools' formats.

* :func:`read_msccl`: import an MSCCL-IR XML algorithm (what MSCCL's executor runs, what
  msccl-tools' MSCCLang compiler writes) as a :class:`commsim.Schedule`.
"""

from commsim.interop._msccl_read import read_msccl

__all__ = ["read_msccl"]
