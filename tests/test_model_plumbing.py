"""The predict plumbing written once: every model builds its ``Prediction`` with
``Prediction.from_clocks`` and words a time below its own bound with the one note; ``timeline`` is
part of the ``Model`` protocol (that ``commsim.models`` imports without a cycle is
tests/test_architecture.py's check, over the whole package)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import commsim
from commsim import Schedule
from commsim.models import (
    Hockney,
    LogGP,
    Model,
    Prediction,
    Timeline,
    Topology,
    TwoLevelHockney,
    as_sizes,
)
from commsim.models._prediction import below_bound_note
from commsim.topology import ring, switch

P = 8
MODELS = {
    "hockney": lambda: Hockney(),
    "hockney_2ports": lambda: Hockney(ports=2),
    "loggp": lambda: LogGP(),
    "topology": lambda: Topology(switch(P)),
    "topology_maxmin_ring": lambda: Topology(ring(P, latency="0.5us"), contention="maxmin"),
    "topology_flow": lambda: Topology(switch(P), contention="flow"),
    "two_level": lambda: TwoLevelHockney(("1us", "100GB/s"), ("5us", "10GB/s"), ranks_per_node=4),
}
#: the one wording (the numbers are the model's own)
NOTE = re.compile(
    r"predicted \S+ at \S+ is below the \S+ any (\w+) on (\d+) ranks needs under this model: "
    r"this schedule cannot compute its collective \(commsim\.verify says where it goes wrong\)"
)
CORRECT = [("allreduce", "ring"), ("allreduce", "rabenseifner"), ("allgather", "ring")]


def _wrong(kind: str) -> Schedule:
    """An allreduce on ``P`` ranks that cannot compute it: no steps, or a ring's first step."""
    if kind == "empty":
        return Schedule.from_steps([], collective="allreduce", nranks=P, nslots=P)
    full = commsim.build("allreduce", "ring", nranks=P)
    return Schedule.from_steps(
        [full.step(0)], collective="allreduce", nranks=P, slot_units=full.slot_units
    )


@pytest.fixture(params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.fixture
def constructed(monkeypatch):
    """The predictions ``Prediction.from_clocks`` built during the test."""
    built: list[Prediction] = []
    original = Prediction.from_clocks.__func__

    def spy(cls, *args, **kwargs):
        pred = original(cls, *args, **kwargs)
        built.append(pred)
        return pred

    monkeypatch.setattr(Prediction, "from_clocks", classmethod(spy))
    return built


# -- one note, every model ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["empty", "truncated"])
@pytest.mark.parametrize("nbytes", ["1MiB", "1KiB..1MiB"])
def test_every_model_words_a_time_below_its_bound_the_same_way(model, kind, nbytes):
    s = _wrong(kind)
    sizes, _ = as_sizes(nbytes)
    pred = model.predict(s, nbytes)
    [note] = pred.notes
    assert NOTE.fullmatch(note) and NOTE.fullmatch(note).groups() == ("allreduce", str(P))
    bound = model.lower_bound(s.collective, s.nranks, sizes)
    assert note == below_bound_note(s, sizes, np.atleast_1d(pred.time), bound)[0]


def test_the_note_names_the_first_size_below_the_bound():
    s = _wrong("truncated")
    note = below_bound_note(s, np.array([1.0, 2.0, 4.0]), np.array([5.0, 1.0, 1.0]), 2.0)[0]
    assert note.startswith("predicted 1.00s at 2B is below the 2.00s any allreduce on 8 ranks")
    assert below_bound_note(s, np.array([1.0]), np.array([2.0]), 2.0) == ()


@pytest.mark.parametrize(("collective", "algorithm"), CORRECT)
def test_a_correct_schedule_has_no_note(model, collective, algorithm):
    s = commsim.build(collective, algorithm, nranks=P)
    assert model.predict(s, "1KiB..1MiB").notes == ()


# -- one constructor, every model -----------------------------------------------------------------
@pytest.mark.parametrize("nbytes", [2**20, [0.0, 4096.0, 2.0**20]])
def test_every_prediction_comes_from_the_one_constructor(model, constructed, nbytes):
    s = commsim.build("allreduce", "ring", nranks=P)
    pred = model.predict(s, nbytes)
    assert constructed == [pred]
    scalar = np.ndim(nbytes) == 0
    assert np.ndim(pred.time) == (0 if scalar else 1)
    assert pred.rank_time.shape == ((P,) if scalar else (P, 3))
    assert pred.step_time.shape[0] == s.nsteps
    np.testing.assert_array_equal(pred.time, pred.rank_time.max(axis=0))
    np.testing.assert_array_equal(pred.step_time[-1], pred.time)
    assert pred.model == model.describe()
    assert pred.busbw_factor == s.spec.busbw_factor(P)
    assert (pred.network is not None) == isinstance(model, Topology | TwoLevelHockney)


def test_the_constructor_takes_the_network_or_a_function_of_the_time():
    s = commsim.build("allgather", "ring", nranks=4)
    clocks, steps = np.array([[1.0, 2.0]] * 4), np.array([[1.0, 2.0]] * s.nsteps)
    seen = []
    pred = Prediction.from_clocks(
        s, np.array([1.0, 2.0]), False, clocks, steps, model=Hockney(), network=seen.append
    )
    assert pred.time.tolist() == [1.0, 2.0] and seen[0].tolist() == [1.0, 2.0]


# -- timeline is part of the protocol ------------------------------------------------------------
def test_timeline_is_part_of_the_protocol(model):
    assert isinstance(model, Model) and "timeline" in Model.__dict__
    s = commsim.build("allreduce", "ring", nranks=P)
    if isinstance(model, Hockney) and model.ports != "single":
        with pytest.raises(commsim.ParameterError, match="single-port"):
            model.timeline(s, "1MiB")
        return
    tl = model.timeline(s, "1MiB")
    assert isinstance(tl, Timeline) and tl.nmessages == 2 * (P - 1) * P
    assert tl.last_end == pytest.approx(model.predict(s, "1MiB").time, rel=1e-12)
    with pytest.raises(commsim.ResourceError):
        model.timeline(s, "1MiB", max_messages=P)
    with pytest.raises(commsim.ParameterError, match="one message size"):
        model.timeline(s, "1KiB..1MiB")
