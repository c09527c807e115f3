"""Backends declare how they run: one table of rows, capabilities asked with ``supports``.

A toy backend defined here, registered with one call, is reachable from ``commsim run``:
adding a backend touches ``commsim/exec/`` (or a plug-in's own module) and nothing else.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import pytest

import commsim
from commsim.bench import BenchRequest, measure, measure_mpi
from commsim.bench.calibrate import SUITES
from commsim.bench.calibrate import calibrate as calibrate_transport
from commsim.cli import main
from commsim.errors import CommsimError, ParameterError, UnknownNameError
from commsim.exec import (
    BACKENDS,
    IN_PROCESS,
    MPIRUN,
    BackendInfo,
    Compiled,
    HostNative,
    IdleRun,
    OnCommunicator,
    StepTimed,
    backend_info,
    get_backend,
    interpret,
    register_backend,
    supports,
    unregister_backend,
)


class ToyBackend:
    """Every rank a row of one numpy array, run by the reference interpreter: the smallest
    backend there is, with none of the optional capabilities."""

    name = "toy"
    prepared: ClassVar[list[int]] = []  # what ``prepare`` was asked for, in order

    @staticmethod
    def prepare(nranks: int) -> None:
        ToyBackend.prepared.append(nranks)

    @staticmethod
    def check_dtype(dtype: Any) -> np.dtype:
        return np.dtype(dtype)

    def unavailable(self) -> str | None:
        return None

    @staticmethod
    def native_name(collective: str) -> str:
        return "none"

    @staticmethod
    def host_workers(nranks: int) -> int:
        return 1

    def compile(self, schedule, layout, dtype) -> Compiled:
        return Compiled(
            put=lambda host: np.array(host, dtype=dtype),
            run=lambda buf: interpret(schedule, layout, buf),
            get=lambda buf: buf,
        )

    def native(self, schedule, layout, dtype) -> Compiled | None:
        return None


@pytest.fixture
def cli(capsys):
    """``cli(*argv)`` -> ``(exit status, stdout, stderr)`` of ``commsim`` run in this process."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            rc = main(list(argv))
        except SystemExit as e:  # argparse's own exits (--help, a bad choice)
            rc = e.code
        out, err = capsys.readouterr()
        return rc, out, err

    return run


@pytest.fixture
def toy():
    ToyBackend.prepared.clear()
    row = register_backend(BackendInfo("toy", ToyBackend, summary="a test's numpy rows"))
    yield row
    unregister_backend("toy")


def test_a_toy_backend_runs_from_the_command_line(toy, cli):
    argv = ["run", "-c", "allreduce", "-a", "ring", "-p", "3", "--backend", "toy", "-s", "1KiB"]
    rc, out, err = cli(*argv, "--iters", "2", "--warmup", "0", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["backend"] == "toy"
    assert [m["check"] for m in doc["measurements"]] == ["ok"]
    assert ToyBackend.prepared == [3]  # prepared for p ranks before it started
    rc, out, _ = cli("run", "--help")
    assert "toy = a test's numpy rows" in " ".join(out.split())


def test_the_toy_is_gone_once_unregistered(cli):
    assert "toy" not in BACKENDS
    with pytest.raises(UnknownNameError, match="unknown backend 'toy'; available: numpy"):
        get_backend("toy")
    rc, _, err = cli("run", "-c", "allreduce", "-a", "ring", "-p", "2", "--backend", "toy")
    assert rc == 2 and "invalid choice: 'toy'" in err


def test_get_backend_prepares_only_when_told_the_rank_count(toy):
    assert isinstance(get_backend("toy"), ToyBackend) and ToyBackend.prepared == []
    get_backend("toy", nranks=5)
    assert ToyBackend.prepared == [5]


def test_the_launcher_decides_where_ranks_start(toy):
    s = commsim.build("allreduce", "ring", nranks=2)
    request = BenchRequest(sizes=(64,), iters=1, warmup=0)
    [m] = measure(s, "toy", request)
    assert m.check == "ok"
    with pytest.raises(CommsimError, match="measure_mpi runs mpi, mpi4py or shmem, not 'toy'"):
        measure_mpi([s], request, backend="toy")
    with pytest.raises(CommsimError, match=r"measure\(\) runs single-process backends"):
        measure(s, "mpi4py", request)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_rows_say_what_their_classes_do(name):
    """A row's declared capabilities are the class's, so reading the row (no import) and
    asking the class never disagree."""
    row = backend_info(name)
    cls = row.load()
    assert cls.name == name
    assert row.step_trace == supports(cls, StepTimed)
    assert row.multiprocess == supports(cls, OnCommunicator)
    assert row.summary and "(" not in row.summary and ";" not in row.summary
    if row.calibration:
        assert row.calibration in SUITES and SUITES[row.calibration].transport


def test_a_subclass_declines_a_capability_with_none():
    mpi, host = backend_info("mpi").load(), backend_info("mpi4py").load()
    assert supports(mpi, HostNative) and supports(mpi, StepTimed) and supports(mpi, IdleRun)
    assert not supports(host, HostNative) and not supports(host, StepTimed)
    assert supports(host, IdleRun) and supports(host, OnCommunicator)
    assert not supports(ToyBackend(), IdleRun) and not supports(ToyBackend, HostNative)


def test_calibration_comes_from_the_row(toy):
    with pytest.raises(CommsimError, match="calibrate runs on jax, mpi or cuda, not 'toy'"):
        calibrate_transport("toy", 2)


def test_a_bad_row_is_refused():
    with pytest.raises(ParameterError, match="launcher must be 'in-process' or 'mpirun'"):
        BackendInfo("x", ToyBackend, launcher="ssh")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="a backend name is letters"):
        register_backend(BackendInfo("no spaces", ToyBackend))
    assert (IN_PROCESS, MPIRUN) == ("in-process", "mpirun")


def test_mpi_backends_is_deprecated():
    with pytest.warns(DeprecationWarning, match="MPI_BACKENDS is deprecated"):
        from commsim.exec import MPI_BACKENDS
    assert MPI_BACKENDS == ("mpi", "mpi4py", "shmem")


def test_the_table_of_strings_still_works_for_one_release():
    """``BACKENDS`` used to map names to ``"module:attribute"`` strings."""
    with pytest.warns(DeprecationWarning, match=r"BACKENDS\[name\]\.split"):
        assert BACKENDS["numpy"].split(":") == ["commsim.exec.reference", "NumpyBackend"]
    try:
        with pytest.warns(DeprecationWarning, match="use commsim.exec.register_backend"):
            BACKENDS["toy"] = f"{__name__}:ToyBackend"
        assert backend_info("toy").load() is ToyBackend and not backend_info("toy").multiprocess
    finally:
        unregister_backend("toy")


class Unprepared(ToyBackend):
    """A backend written before ``prepare``: it still runs, with a warning."""

    prepare = None  # type: ignore[assignment]


def test_a_backend_without_prepare_still_starts():
    register_backend(BackendInfo("old", Unprepared))
    try:
        with pytest.warns(DeprecationWarning, match="Unprepared without prepare"):
            assert isinstance(get_backend("old", nranks=4), Unprepared)
    finally:
        unregister_backend("old")


def test_asking_about_a_capability_starts_nothing():
    """``supports`` looks statically: an MPI backend's communicator (a property that starts
    MPI) is not touched by asking whether it has one."""
    mpi = backend_info("mpi").load()()
    assert supports(mpi, OnCommunicator) and mpi._comm is None
