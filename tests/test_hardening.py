"""Bad input to the Python API ends in one CommsimError sentence, never a hang, a traceback from
deep inside numpy, or a silently impossible number (issue: hardening)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import commsim
from commsim import CommsimError, ResourceError, ScheduleError, units
from commsim.models import Hockney, lower_bound

RING = commsim.build("allreduce", "ring", nranks=8)


# -- units: numbers far past any float are refused before exact arithmetic builds them -------
@pytest.mark.parametrize("text", ["1e999999999", "1e-999999999", "1" * 200, "2e+99999KiB"])
def test_sizes_out_of_any_range_are_refused_at_once(text):
    with pytest.raises(units.UnitError, match=r"out of range|too many digits"):
        units.parse_size(text)


@pytest.mark.parametrize("text", ["1e999999999us", "1e-999999999s"])
def test_times_out_of_any_range_are_refused_at_once(text):
    with pytest.raises(units.UnitError, match="out of range"):
        units.parse_time(text)


# -- the API: one sentence, unit strings accepted --------------------------------------------
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Hockney().predict(RING, nbytes=[]), "nbytes is empty"),
        (lambda: Hockney().predict("ring", 1), "expected a commsim.Schedule"),
        (lambda: Hockney(beta=None), "beta must be a number"),
        (lambda: Hockney(alpha="2 parsecs"), "alpha: cannot parse"),
        (lambda: Hockney().predict(RING, nbytes=[[1, 2]]), "1-D"),
        (lambda: Hockney().predict(RING, nbytes="lots"), "nbytes"),
        (lambda: lower_bound("nope", 8, 1.0, 1, 1, 1), "unknown collective"),
        (lambda: lower_bound("allreduce", 0, 1.0, 1, 1, 1), "rank count"),
        (lambda: lower_bound("allreduce", 8, -1e6, 1, 1, 1), "sizes must be"),
        (lambda: lower_bound("allreduce", 8, 1.0, -1, 1, 1), "alpha must be"),
        (lambda: commsim.verify("ring"), "expects a commsim.Schedule"),
        (lambda: commsim.Step.make(src=[0.5], dst=[1], src_slot=0, dst_slot=0), "integers"),
        (lambda: commsim.spec("allreduse"), "did you mean allreduce"),
    ],
)
def test_bad_api_input_is_one_commsim_error(call, match):
    with pytest.raises(CommsimError, match=match):
        call()


def test_the_api_takes_the_unit_strings_the_cli_teaches():
    a = Hockney(alpha="2us", beta="25GB/s", gamma="100GB/s").predict(RING, "1MiB")
    b = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9).predict(RING, 2**20)
    assert a.time == b.time
    many = Hockney().predict(RING, "1KiB..4KiB")
    assert many.nbytes.tolist() == [1024, 2048, 4096]


def test_hockney_defaults_are_the_cli_defaults():
    m = Hockney()
    assert (m.alpha, m.beta, m.gamma, m.ports) == (2e-6, 1 / 25e9, 1 / 100e9, "single")


# -- impossible numbers: said, not printed silently -------------------------------------------
def test_an_empty_schedule_predicts_with_a_note_saying_it_cannot_be_right():
    empty = commsim.Schedule.from_steps([], collective="allreduce", nranks=8, nslots=8)
    pred = Hockney().predict(empty, 2**20)
    assert pred.time == 0.0
    [note] = pred.notes
    assert "below" in note and "cannot compute" in note
    assert Hockney().predict(RING, 2**20).notes == ()


def test_slot_units_whose_sum_overflows_are_refused():
    with pytest.raises(ScheduleError, match="2\\*\\*62"):
        commsim.Schedule.from_steps([], collective="allreduce", nranks=2, slot_units=[2**62, 2**62])


# -- files: validated on load -----------------------------------------------------------------
def test_deeply_nested_json_is_a_schedule_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ScheduleError, match="nested too deeply"):
        commsim.load(path)


def test_a_file_that_is_not_a_zip_is_a_schedule_error(tmp_path):
    path = tmp_path / "garbage.npz"
    path.write_bytes(b"this is not a zip archive" * 10)
    with pytest.raises(ScheduleError, match="not a commsim NPZ schedule"):
        commsim.load(path)


def test_a_zip_bomb_is_refused_before_it_inflates(tmp_path, monkeypatch):
    from commsim import _serialize

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("src.npy", b"\0" * (8 * 2**20))  # 8 MiB of zeros: a few KiB on disk
    monkeypatch.setattr(_serialize, "_memory_limit", lambda: 2**20)
    with pytest.raises(ResourceError, match="inflate to 8MiB"):
        commsim.load(path)


def _saved_npz(tmp_path, schedule):
    path = commsim.save(schedule, tmp_path / "s.npz")
    with np.load(path) as z:
        return path, dict(z)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda ptr: ptr[:-1],  # truncated: the last step's transfers are dropped
        lambda ptr: ptr[::-1],  # reversed
        lambda ptr: np.concatenate([ptr, [ptr[-1] + 5]]),  # points past the transfers
        lambda ptr: ptr.astype(np.float64),
    ],
)
def test_a_malformed_step_index_is_refused(tmp_path, mangle):
    path, arrays = _saved_npz(tmp_path, commsim.build("allreduce", "ring", nranks=4))
    arrays["step_ptr"] = mangle(arrays["step_ptr"])
    np.savez(path, **arrays)
    with pytest.raises(ScheduleError, match="step_ptr"):
        commsim.load(path)


def test_transfer_fields_of_different_lengths_are_refused(tmp_path):
    path, arrays = _saved_npz(tmp_path, commsim.build("allreduce", "ring", nranks=4))
    arrays["dst"] = arrays["dst"][:-1]
    np.savez(path, **arrays)
    with pytest.raises(ScheduleError, match="one length"):
        commsim.load(path)


def test_version_1_files_still_load(tmp_path):
    doc = json.loads(commsim.save(RING, tmp_path / "r.json").read_text())
    doc["version"], doc["name"] = 1, doc.pop("algorithm")
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    assert commsim.load(tmp_path / "v1.json").algorithm == "ring"


@pytest.mark.parametrize("text", ["25gb/s", "100mbps", "1gib/s", "2tb/s"])
def test_a_bare_b_after_a_lower_case_prefix_is_ambiguous(text):
    with pytest.raises(units.UnitError, match=r"ambiguous bandwidth .* \(bytes\) or .*bit/s"):
        units.parse_bandwidth_or_inverse(text)


@pytest.mark.parametrize(
    ("text", "seconds_per_byte"),
    [("25Gb/s", 8 / 25e9), ("25gbit/s", 8 / 25e9), ("25gB/s", 1 / 25e9), ("8kb/s", 8 / 8e3)],
)
def test_unambiguous_rates_still_parse(text, seconds_per_byte):
    assert units.parse_bandwidth_or_inverse(text) == pytest.approx(seconds_per_byte)


def test_verification_time_excludes_loading_the_kernel(monkeypatch):
    import time

    from commsim import _verify_kernel

    loaded = []
    monkeypatch.setattr(_verify_kernel, "warm_up", lambda: (time.sleep(0.5), loaded.append(1)))
    v = commsim.verify(commsim.build("allreduce", "ring", nranks=4))
    assert loaded and v.seconds < 0.5  # the load happened, and outside the timed part


def test_absurd_slot_counts_are_refused_before_allocating():
    with pytest.raises(ScheduleError, match="slots per rank, got 1,000,000,000"):
        commsim.build("broadcast", "chain", nranks=8, segments=10**9)


@pytest.mark.parametrize(
    ("value", "dtype", "result"),
    [(60000.0, np.float16, np.inf), (np.nan, np.float32, np.nan), (-np.inf, np.float64, -np.inf)],
)
def test_overflow_inf_and_nan_agree_with_the_reference_silently(value, dtype, result):
    from commsim.exec import execute

    x = np.full((4, 8), value, dtype)
    out = execute(commsim.build("allreduce", "ring", nranks=4), x)  # warnings are errors here
    np.testing.assert_array_equal(out, np.full((4, 8), result, dtype))


@pytest.mark.parametrize(
    ("dtype", "match"),
    [
        (object, "got object"),
        (">f4" if np.little_endian else "<f4", "byte order"),
        (bool, "got bool"),
    ],
)
def test_execute_refuses_dtypes_its_backend_does_not_run(dtype, match):
    from commsim.exec import execute

    with pytest.raises(CommsimError, match=match):
        execute(RING, np.zeros((8, 8), dtype=dtype))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: commsim.build(None, "ring", nranks=8), "unknown collective None"),
        (lambda: commsim.build([1], "ring", nranks=8), "unknown collective"),
        (lambda: commsim.build("allreduce", None, nranks=8), "unknown allreduce algorithm None"),
        (lambda: commsim.build("allreduce", "ring", nranks=10**12), "nranks must be"),
        (lambda: commsim.build("allreduce", "ring", nranks="8"), "nranks must be"),
    ],
)
def test_build_refuses_bad_names_and_absurd_rank_counts(call, match):
    with pytest.raises(CommsimError, match=match):
        call()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"slot_units": [[1, 2], [3]]}, "'slot_units' must be a list of integers"),
        ({"root": 1}, "allreduce has no root"),
        ({"root": True}, "'root' must be an integer"),
        ({"nranks": 10**12}, "'nranks' must be an integer in"),
        ({"slot_units": [2**62, 2**62, 1, 1]}, "2\\*\\*62"),
    ],
)
def test_every_load_error_names_the_file(tmp_path, change, match):
    doc = json.loads(
        commsim.save(commsim.build("allreduce", "ring", nranks=4), tmp_path / "r.json").read_text()
    )
    doc.update(change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ScheduleError, match=match) as e:
        commsim.load(path)
    assert str(e.value).startswith(str(path))


def test_a_ragged_step_field_is_a_schedule_error(tmp_path):
    doc = json.loads(commsim.save(RING, tmp_path / "r.json").read_text())
    doc["steps"][0]["src"] = [[0], [1, 0]]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ScheduleError, match="field 'src' must be a list of integers"):
        commsim.load(tmp_path / "bad.json")
