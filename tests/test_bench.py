"""``commsim.bench`` on one process (nccl-tests' definitions), on numpy (``commsim run``: tests/cli)."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import SPECS
from commsim._progress import Progress
from commsim.bench import BenchRequest, Measurement, format_table, measure
from commsim.errors import CommsimError
from commsim.exec import Compiled
from commsim.exec.reference import NumpyBackend


class WithNative(NumpyBackend):
    """The numpy backend plus an allreduce "native" computed directly (a second real path)."""

    name = "numpy+native"

    def native(self, schedule, layout, dtype):
        c = layout.count

        def run(buf):
            out = buf.copy()
            out[:, :c] = buf[:, :c].sum(axis=0)
            return out

        return Compiled(put=lambda h: np.array(h, dtype=dtype), run=run, get=lambda b: b)

    def native_name(self, kind):
        return "numpy.sum"


class Broken(NumpyBackend):
    """Returns its input unchanged: every check must fail."""

    name = "broken"

    def compile(self, schedule, layout, dtype):
        return Compiled(put=lambda h: np.array(h, dtype=dtype), run=lambda b: b, get=lambda b: b)


@pytest.mark.parametrize(
    ("collective", "name", "p"), [("allreduce", "ring", 4), ("allgather", "ring", 3)]
)
def test_measurement_fields_follow_nccl_tests(collective, name, p):
    s = commsim.build(collective, name, nranks=p)
    sizes = [1024, 4096 + 3, 1 << 16]
    ms = measure(s, "numpy", BenchRequest(sizes, dtype="float32", iters=5, warmup=2))
    assert [m.size for m in ms] == sizes
    factor = SPECS[collective].busbw_factor(p)
    for m in ms:
        assert m.nbytes == m.count * 4 <= m.size
        assert m.count % s.nbytes_units == 0 and m.size - m.nbytes < 4 * s.nbytes_units
        assert m.time_min_s <= m.time_s <= m.time_max_s
        assert m.spread >= 0
        assert m.algbw_Bps == pytest.approx(m.nbytes / m.time_s)
        assert m.busbw_Bps == pytest.approx(m.algbw_Bps * factor)
        assert (m.check, m.error, m.native, m.ratio) == ("ok", None, None, None)
        assert (m.iters, m.warmup, m.nranks, m.dtype, m.backend) == (5, 2, p, "float32", "numpy")
        d = m.to_dict()
        assert d["time_s"] == m.time_s and json.loads(json.dumps(d)) == d


def test_baseline_ratio_is_busbw_over_native_busbw():
    s = commsim.build("allreduce", "ring", nranks=4)
    [m] = measure(s, WithNative(), BenchRequest((1 << 14,), iters=4, warmup=1))
    assert m.check == "ok" and m.native == "numpy.sum"
    assert m.native_busbw_Bps == pytest.approx(m.nbytes / m.native_time_s * 1.5)
    assert m.ratio == pytest.approx(m.busbw_Bps / m.native_busbw_Bps)


def test_failed_check_is_recorded_not_raised():
    s = commsim.build("allreduce", "ring", nranks=3)
    [m] = measure(s, Broken(), BenchRequest((1200,), iters=2, warmup=0))
    assert m.check == "FAILED" and "rank" in m.error and "reference interpreter" in m.error
    assert "FAILED at" in format_table([m])
    [m] = measure(s, Broken(), BenchRequest((1200,), iters=2, warmup=0, check=False))
    assert (m.check, m.error) == ("skipped", None)


def test_bad_arguments_are_refused_before_running():
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(CommsimError, match=r"size 8B is below the smallest size .* \(16B"):
        measure(s, "numpy", BenchRequest((1 << 20, 8)))
    with pytest.raises(CommsimError, match="iters >= 1"):
        measure(s, "numpy", BenchRequest((1024,), iters=0))
    with pytest.raises(CommsimError, match="commsim run --backend mpi"):
        measure(s, "mpi", BenchRequest((1024,)))


def test_format_table_is_aligned_with_one_row_per_size():
    s = commsim.build("allreduce", "ring", nranks=2)
    ms = measure(s, WithNative(), BenchRequest((1024, 1 << 20), iters=2, warmup=0))
    lines = format_table(ms).splitlines()
    assert lines[0].split()[:3] == ["size", "count", "time"] and set(lines[1]) <= {"-", " "}
    assert len(lines) == 4
    assert lines[2].split()[0] == "1KiB" and lines[3].endswith("ok")
    end = lines[0].index("ratio") + len("ratio")  # numbers are right-aligned under their heads
    assert all(line[end - 1] == "x" for line in lines[2:])


def test_progress_bar_draws_only_when_asked():
    out = io.StringIO()
    with Progress(3, "t", stream=out, enabled=True) as bar:
        for _ in range(3):
            bar.update(note="x")
    assert "[" in out.getvalue() and "3/3" in out.getvalue() and out.getvalue().endswith("\n")
    quiet = io.StringIO()  # not a terminal: off by default
    with Progress(3, "t", stream=quiet) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""


def test_measurement_is_plain_data():
    fields = set(Measurement.__dataclass_fields__)
    assert {"time_s", "algbw_Bps", "busbw_Bps", "native_busbw_Bps", "ratio", "check"} <= fields


# -- the request ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"iters": 0}, r"need iters >= 1 \(timed runs per size\), got iters=0"),
        ({"iters": 2.5}, "need iters >= 1"),
        ({"warmup": -1}, r"need warmup >= 0 \(untimed runs first\), got warmup=-1"),
        ({"seed": -3}, "need seed >= 0"),
        ({"sizes": (1024, -8)}, "sizes must be >= 0 bytes, got -8"),
        ({"sizes": ()}, "give at least one message size"),
        ({"sizes": "1KiB"}, "sizes must be a sequence of byte counts"),
        ({"sizes": (1.5,)}, "sizes must be whole numbers of bytes, got 1.5"),
        ({"dtype": "bool"}, "dtype must be numeric, got 'bool'"),
        ({"dtype": "floaty"}, "unknown dtype 'floaty'"),
        ({"check": "yes"}, "check must be True or False"),
    ],
)
def test_a_bad_request_is_one_sentence(kw, message):
    with pytest.raises(CommsimError, match=message) as e:
        BenchRequest(**{"sizes": (1024,), **kw})
    assert "\n" not in str(e.value)


def test_the_request_is_normalized_frozen_and_round_trips():
    r = BenchRequest([4096, np.int64(64)], dtype="f4", check=np.bool_(False))
    assert (r.sizes, r.dtype, r.check) == ((4096, 64), "float32", False)
    assert type(r.sizes[1]) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.iters = 3
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d and BenchRequest.from_dict(d) == r
    with pytest.raises(CommsimError, match="unknown request field"):
        BenchRequest.from_dict({**d, "units": 3})


def test_measure_refuses_an_mpi_backend_object():
    from commsim.exec.mpi import MpiBackend  # creating it starts no MPI

    s = commsim.build("allreduce", "ring", nranks=2)
    with pytest.raises(CommsimError, match="measure_mpi"):
        measure(s, MpiBackend(), BenchRequest((1024,)))


def test_a_hand_built_schedule_is_measured_and_checked(toy_allreduce):
    ok, half = toy_allreduce(), toy_allreduce(complete=False)
    assert ("allreduce", "toy") not in commsim.algorithms.REGISTRY
    [m] = measure(ok, "numpy", BenchRequest((64,), iters=1, warmup=0))
    assert (m.algorithm, m.check, m.nbytes) == ("toy", "ok", 64)
    [m] = measure(half, "numpy", BenchRequest((64,), iters=1, warmup=0))
    assert m.check == "FAILED" and m.error.startswith("schedule: allreduce 'half_toy'")


# -- validate --------------------------------------------------------------------------------------


VALIDATION_KEYS = [
    "size",
    "nbytes",
    "predicted_best",
    "predicted_s",
    "measured_s",
    "native",
    "native_s",
    "measured_over_predicted",
    "fastest_measured",
    "check",
    "measured",
    "predicted",
    "spread",
    "predicted_ties",
    "measured_ties",
    "overhead_s",
    "host_native",
    "host_native_s",
    "identical",
    "params",
    "checks",
    "iters",
    "error",
    "error_with_overhead",
    "ranked_right",
]


def test_validate_picks_the_predicted_winner_and_re_predicts_at_the_bytes_that_ran():
    from commsim.bench import validate
    from commsim.models import Hockney

    model = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9)
    names = ["ring", "recursive_doubling", "rabenseifner"]
    schedules = [commsim.build("allreduce", a, nranks=4) for a in names]
    request = BenchRequest((64, (1 << 20) + 4), iters=1, warmup=0)  # the second rounds down
    vs, ms = validate(schedules, model, "numpy", request)
    assert [v.predicted_best for v in vs] == ["recursive_doubling", "rabenseifner"]
    # only the winners ran, schedule-major, size-minor
    assert [(m.algorithm, m.size) for m in ms] == [
        (a, n) for a in ("recursive_doubling", "rabenseifner") for n in request.sizes
    ]
    assert vs[1].nbytes == 1 << 20
    for v, want in zip(vs, schedules[1:], strict=True):
        assert list(v.to_dict()) == VALIDATION_KEYS and json.loads(json.dumps(v.to_dict()))
        assert v.predicted_s == model.predict(want, float(v.nbytes)).time
        assert v.nbytes <= v.size and v.check == "ok" and v.native is None
        assert v.measured_over_predicted == pytest.approx(v.measured_s / v.predicted_s)
    vs, ms = validate(schedules, model, "numpy", request, run_all=True)
    assert len(ms) == 6 and all(set(v.measured) == set(names) for v in vs)
    assert all(v.fastest_measured == min(v.measured, key=v.measured.get) for v in vs)
    for v in vs:  # every schedule that ran is predicted at the bytes that ran, with its spread
        assert set(v.predicted) == set(v.spread) == set(names)
        assert v.fastest_measured in v.measured_ties and v.predicted_best in v.predicted_ties


def test_validate_names_ties_instead_of_hiding_them_behind_list_order():
    from commsim.bench import validate

    # at p = 2 ring, direct and rabenseifner are one exchange each way: the same prediction
    model = commsim.models.Hockney()
    names = ["ring", "direct", "rabenseifner", "binomial"]
    schedules = [commsim.build("allreduce", a, nranks=2) for a in names]
    [v], _ = validate(schedules, model, "numpy", BenchRequest((1 << 20,), iters=3, warmup=0))
    assert v.predicted_ties == ("ring", "direct", "rabenseifner")
    assert v.predicted_best == "ring" and set(v.measured) == {"ring"}


def test_validate_refuses_bad_schedules_and_mpi_under_mpirun(monkeypatch):
    from commsim.bench import validate
    from commsim.models import Hockney

    ring = commsim.build("allreduce", "ring", nranks=2)
    request = BenchRequest((1024,))
    with pytest.raises(CommsimError, match="distinct algorithm names"):
        validate([ring, ring], Hockney(), "numpy", request)
    with pytest.raises(CommsimError, match="at least one schedule"):
        validate([], Hockney(), "numpy", request)
    monkeypatch.setenv("PMI_RANK", "0")
    with pytest.raises(
        CommsimError, match=r"^validate starts mpirun itself: run it without mpirun$"
    ):
        validate([ring], Hockney(), "mpi", request)


# -- layering ------------------------------------------------------------------------------------

PACKAGE = Path(commsim.__file__).parent
FORBIDDEN = ("commsim.algorithms", "commsim.cli", "commsim._cli")
#: the IR floor's modules bench stands on (docs/architecture.md); nothing else private of another
#: package
FLOOR_MODULES = (
    "commsim._ir",
    "commsim._compat",
    "commsim._progress",
    "commsim._toml",
    "commsim._lazy",  # package __init__s that import on first use
    "commsim._cluster_model",
    "commsim._wire",
)


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` of every import in ``path``, function-level ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            out += [(node.module or "", a.name) for a in node.names]
    return out


@pytest.mark.parametrize(
    "path",
    sorted([*(PACKAGE / "bench").glob("*.py"), *(PACKAGE / "exec").glob("**/*.py")]),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_bench_and_exec_never_import_the_registry_or_the_cli(path):
    package = ".".join(path.relative_to(PACKAGE.parent).parent.parts)
    for module, name in _imports(path):
        full = f"{module}.{name}" if name else module
        assert not full.startswith(FORBIDDEN), f"{path.name} imports {full}"
        assert not (module == "commsim" and name in ("algorithms", "build", "available", "cli"))
        if path.parent.name == "bench":
            assert module != "argparse", f"{path.name} imports argparse"
            # no private module of another package: only this package's own, and the floor's
            # (the IR and its helpers at the package root: ``commsim._ir``, ``commsim._compat``)
            private = [p for p in full.split(".") if p.startswith("_") and p != "__future__"]
            if private and not module.startswith(package):
                assert module in FLOOR_MODULES and not (name or "").startswith("_"), (
                    f"{path.name} imports the private {full}"
                )
            # the layer it uses, not the package's face: ``from commsim import units`` names a
            # module, ``from commsim import Schedule`` a re-export
            if module == "commsim" and name:
                is_module = (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()
                assert is_module, f"{path.name} imports {name} from the package face"


class _Recording(NumpyBackend):
    """The numpy backend with a native collective that works in place (like CUDA's kernels),
    remembering the largest magnitude each run, the schedule's or the native's, starts from."""

    def __init__(self) -> None:
        self.starts: dict[str, list[float]] = {"schedule": [], "native": []}

    def _recorded(self, inner: Compiled, what: str) -> Compiled:
        def run(buf):
            self.starts[what].append(float(np.abs(buf).max()))
            return inner.run(buf)

        return Compiled(put=inner.put, run=run, get=inner.get)

    def compile(self, schedule, layout, dtype):
        return self._recorded(super().compile(schedule, layout, dtype), "schedule")

    def native(self, schedule, layout, dtype):  # the schedule again: it sums in place
        return self._recorded(super().compile(schedule, layout, dtype), "native")


def test_every_timed_run_starts_from_the_same_inputs():
    # chained runs (buf = run(buf)) would multiply an allreduce's values by p each time: a
    # float16 run would be timing arithmetic on inf after a few iterations
    backend = _Recording()
    s = commsim.build("allreduce", "ring", nranks=8)
    [m] = measure(s, backend, BenchRequest(sizes=(4096,), dtype="float16", iters=12, warmup=3))
    assert m.check == "ok"
    for what in ("schedule", "native"):
        timed = backend.starts[what][1:]  # after the check's run
        assert len(timed) == 15 and len(set(timed)) == 1 and np.isfinite(timed[0]), what


def test_more_ranks_than_cores_is_said_in_the_measurement_and_the_table():
    from commsim.bench._machine import oversubscription, usable_cores

    assert oversubscription(2, cores=2) is None
    assert "3 ranks share 2 cores" in oversubscription(3, cores=2)

    class Crowded(NumpyBackend):
        @staticmethod
        def host_workers(nranks):
            return usable_cores() + 1

    s = commsim.build("allreduce", "ring", nranks=4)
    [m] = measure(s, Crowded(), BenchRequest(sizes=(4096,), iters=2, warmup=0))
    [note] = m.notes
    assert "oversubscription" in note and f"note: {note}" in format_table([m])
    [quiet] = measure(s, "numpy", BenchRequest(sizes=(4096,), iters=2, warmup=0))
    assert quiet.notes == () and "note:" not in format_table([quiet])


def test_a_size_whose_buffers_cannot_fit_is_refused_before_allocating():
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(commsim.ResourceError, match=r"64GiB on 4 ranks needs about 1.25TiB"):
        measure(s, "numpy", BenchRequest(sizes=(64 * 2**30,), iters=1, warmup=0))


def test_a_schedule_identical_to_the_pick_counts_as_the_pick():
    """Ring and direct allreduce on 2 ranks are one program: whichever measures faster is noise,
    so the model's pick is ranked right when its twin wins (and not when a different one does)."""
    from commsim.bench import Validation

    ring, direct, rd = (
        commsim.build("allreduce", a, nranks=2) for a in ("ring", "direct", "recursive_doubling")
    )
    assert ring.fingerprint == direct.fingerprint != rd.fingerprint

    def validation(fastest: str, identical: tuple[str, ...]) -> Validation:
        measured = {"ring": 2.0, "direct": 1.0, "recursive_doubling": 1.5}
        measured[fastest] = 0.5
        return Validation(
            size=1024, nbytes=1024, predicted_best="ring", predicted_s=1.0, measured_s=2.0,
            native=None, native_s=None, measured_over_predicted=2.0, fastest_measured=fastest,
            check="ok", measured=measured, identical=identical,
        )  # fmt: skip

    assert validation("direct", ("direct",)).ranked_right is True
    assert validation("direct", ()).ranked_right is False
    assert validation("recursive_doubling", ("direct",)).ranked_right is False
