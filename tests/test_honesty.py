"""Honest validation (issue #26): an error above the documented bound is flagged with the
likely causes the check can see; within the bound, nothing is said."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import platform

import numpy as np
import pytest

from commsim.bench import ERROR_BOUND, validation_warnings
from commsim.bench._machine import usable_cores
from commsim.bench._validate import AlgorithmAccuracy, ValidationSummary
from commsim.bench.calibrate import Samples, profile_from_samples

SIZES = 2.0 ** np.arange(3, 20)


def _summary(*errors: float) -> ValidationSummary:
    rows = tuple(AlgorithmAccuracy(f"a{i}", 5, e, e, 0.02) for i, e in enumerate(errors))
    return ValidationSummary(rows, 0, 0)


def _profile(machine: str, date: str, kinds=("exchange", "step")):
    t = np.outer(2e-6 + SIZES / 5e9, np.ones(5))
    samples = [Samples(k, SIZES, t * (1 + i), "mpi", 2) for i, k in enumerate(kinds)]
    p = profile_from_samples(samples, backend="mpi", nranks=2)
    return dataclasses.replace(p, machine=machine, date=date)


def test_within_the_bound_nothing_is_said():
    assert validation_warnings(_summary(0.05, ERROR_BOUND), 2, None, load=50.0) == ()


def test_each_algorithm_above_the_bound_is_named_with_the_causes_seen():
    here = platform.node()
    fresh = _profile(f"{here}: 2 cores", "2026-11-26T08:00:00")
    w = validation_warnings(_summary(0.45, 0.1, 0.3), 2, fresh, load=0.0,
                            now=dt.datetime(2026, 11, 26, 9))  # fmt: skip
    assert [x.split(":")[0] for x in w] == ["a0", "a2", "likely cause"]
    assert "none this check can see" in w[-1]
    busy = validation_warnings(_summary(0.45), 2, fresh, load=10.0 * usable_cores())
    assert any("the machine is busy" in x for x in busy)
    crowded = validation_warnings(_summary(0.45), usable_cores() + 1, fresh, load=0.0)
    assert any("oversubscribed" in x for x in crowded)
    assert any("no --profile" in x for x in validation_warnings(_summary(0.45), 2, None, load=0))
    old = _profile("elsewhere: 64 cores", "2026-01-01T00:00:00")
    w = validation_warnings(_summary(0.45), 2, old, load=0.0, now=dt.datetime(2026, 11, 26))
    assert any("measured on 'elsewhere" in x for x in w) and any("days old" in x for x in w)
    assert not any("step curve" in x for x in w)
    older = _profile(f"{here}: 2 cores", "2026-11-26T08:00:00", kinds=("exchange",))
    w = validation_warnings(_summary(0.45), 2, older, load=0.0, now=dt.datetime(2026, 11, 26, 9))
    assert any("no step curve" in x for x in w) and "none this check" not in w[-1]


def test_other_load_does_not_count_this_process():
    """A busy loop in this process is the run's own work, not another job's."""
    import time

    from commsim.bench import OtherLoad

    w = OtherLoad.start()
    end = time.perf_counter() + 0.5
    x = 0
    while time.perf_counter() < end:
        x += 1
    load = w.stop(own_processes=1)
    if load is None:
        pytest.skip("no /proc/stat and no load average here")
    # one core of ours was busy all along; other jobs' share is counted apart from it
    assert 0.0 <= load < os.cpu_count()
    assert load < 1.0 or os.getloadavg()[0] > 1.5  # only a busy machine reads as busy
