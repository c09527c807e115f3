"""The timing harness (nccl-tests' definitions) and ``commsim run``, on the numpy backend."""

from __future__ import annotations

import argparse
import io
import json

import numpy as np
import pytest

import commsim
from commsim import SPECS
from commsim._cli_run import add_parser
from commsim._progress import Progress
from commsim.errors import CommsimError
from commsim.exec import Compiled
from commsim.exec.harness import Measurement, format_table, measure
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
    ms = measure(s, "numpy", sizes, dtype="float32", iters=5, warmup=2)
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
    [m] = measure(s, WithNative(), [1 << 14], iters=4, warmup=1)
    assert m.check == "ok" and m.native == "numpy.sum"
    assert m.native_busbw_Bps == pytest.approx(m.nbytes / m.native_time_s * 1.5)
    assert m.ratio == pytest.approx(m.busbw_Bps / m.native_busbw_Bps)


def test_failed_check_is_recorded_not_raised():
    s = commsim.build("allreduce", "ring", nranks=3)
    [m] = measure(s, Broken(), [1200], iters=2, warmup=0)
    assert m.check == "FAILED" and "rank" in m.error and "reference interpreter" in m.error
    assert "FAILED at" in format_table([m])
    [m] = measure(s, Broken(), [1200], iters=2, warmup=0, check=False)
    assert (m.check, m.error) == ("skipped", None)


def test_bad_arguments_are_refused_before_running():
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(CommsimError, match=r"size 8B is below the smallest size .* \(16B"):
        measure(s, "numpy", [1 << 20, 8])
    with pytest.raises(CommsimError, match="iters >= 1"):
        measure(s, "numpy", [1024], iters=0)
    with pytest.raises(CommsimError, match="commsim run --backend mpi"):
        measure(s, "mpi", [1024])


def test_format_table_is_aligned_with_one_row_per_size():
    s = commsim.build("allreduce", "ring", nranks=2)
    ms = measure(s, WithNative(), [1024, 1 << 20], iters=2, warmup=0)
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


# -- commsim run ---------------------------------------------------------------------------------


def run_cli(capsys, *argv):
    top = argparse.ArgumentParser(prog="commsim")
    add_parser(top.add_subparsers(dest="command"))
    args = top.parse_args(["run", *argv])
    rc = args._run(args)
    return rc, *capsys.readouterr()


def test_cli_run_table(capsys):
    rc, out, _ = run_cli(
        capsys, "-c", "allreduce", "-a", "ring", "-p", "3", "--backend", "numpy",
        "-s", "1KiB,4KiB", "--iters", "2", "--warmup", "0",
    )  # fmt: skip
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("# allreduce/ring p=3 on numpy, float32")
    assert len(lines) == 5 and lines[3].split()[0] == "1020B" and lines[4].endswith("ok")


def test_cli_run_json_with_param_and_root(capsys):
    rc, out, _ = run_cli(
        capsys, "-c", "broadcast", "-a", "chain", "-p", "3", "--root", "2", "--param",
        "segments=2", "--backend", "numpy", "-s", "256B", "--iters", "1", "--warmup", "0",
        "--dtype", "int32", "--json",
    )  # fmt: skip
    assert rc == 0
    doc = json.loads(out)
    assert (doc["root"], doc["params"]["segments"], doc["dtype"]) == (2, 2, "int32")
    [m] = doc["measurements"]
    assert m["check"] == "ok" and m["nbytes"] == 256 and m["native_busbw_Bps"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-c", "allreduce", "-a", "ring", "-p", "2,4"], "one rank count"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "--dtype", "str"], "numeric"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "--dtype", "floaty"], "unknown dtype"),
        (["-c", "allreduce", "-a", "rign", "-p", "2"], "did you mean ring"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "--param", "x=1"], "no parameter"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "-s", "1KB..1K"], "ambiguous"),
    ],
)
def test_cli_run_bad_input_is_one_error(capsys, argv, message):
    with pytest.raises(CommsimError, match=message):
        run_cli(capsys, *argv, "--backend", "numpy")


def test_measurement_is_plain_data():
    fields = set(Measurement.__dataclass_fields__)
    assert {"time_s", "algbw_Bps", "busbw_Bps", "native_busbw_Bps", "ratio", "check"} <= fields
