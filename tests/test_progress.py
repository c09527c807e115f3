"""The progress bar: when it shows (delay), how (redrawn on a terminal, tenths in a log), and
tracking the steps pulled from a schedule."""

from __future__ import annotations

import io

import pytest

import commsim
from commsim import _progress
from commsim._progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(_progress.time, "monotonic", c)
    return c


def test_progress_bar_on_a_terminal():
    stream = Terminal()
    progress = Progress(total=0, stream=stream, enabled=True)
    s = commsim.build("allreduce", "ring", 4)
    tracked = progress.track(s, "ring p=4")
    assert sum(st.ntransfers for st in tracked.steps()) == 24
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\r[") and "100%" in text and "ring p=4" in text
    assert text.endswith("\r")  # the bar is erased, the terminal line left clean


def test_track_advances_by_ranks_per_step_pulled():
    s = commsim.build("allreduce", "ring", 4)
    bar = Progress(s.nsteps * s.nranks, enabled=False)
    tracked = bar.track(s, "ring")
    tracked.step(0)
    assert (bar.done, bar.note) == (4, "ring")
    list(tracked.steps())
    assert bar.done == bar.total


@pytest.mark.parametrize(("tty", "delay"), [(True, 0.5), (False, 10.0)])
def test_automatic_bar_waits_before_it_shows(clock, tty, delay):
    stream = Terminal() if tty else io.StringIO()
    bar = Progress(10, "work", stream=stream)
    bar.update()
    clock.now += delay - 0.01
    bar.update()
    assert stream.getvalue() == ""
    clock.now += 0.02
    bar.update()
    assert "work [" in stream.getvalue() and "30% done" in stream.getvalue()


def test_off_a_terminal_one_line_per_tenth(clock):
    stream = io.StringIO()
    bar = Progress(100, "log", stream=stream, enabled=True, count=False)
    for _ in range(100):
        clock.now += 0.001
        bar.update()
    lines = stream.getvalue().splitlines()
    # a line when it starts, then one per tenth
    assert [line.split()[2] for line in lines] == ["1%", *(f"{10 * k}%" for k in range(1, 11))]
    assert all(line.startswith("log [") and "/" not in line for line in lines)
    bar.close()  # lines in a log stay
    assert stream.getvalue().count("\n") == 11


def test_a_terminal_is_redrawn_at_most_every_tenth_of_a_second(clock):
    stream = Terminal()
    bar = Progress(100, stream=stream, enabled=True)
    for _ in range(50):
        bar.update()
    assert stream.getvalue().count("\r") == 1  # the first update only: no time passed
    clock.now += 0.1
    bar.update(50)
    assert stream.getvalue().count("\r") == 2 and "100/100" in stream.getvalue()


def test_disabled_bar_writes_nothing(clock):
    stream = Terminal()
    with Progress(3, stream=stream, enabled=False) as bar:
        clock.now += 60
        bar.update(3)
    assert stream.getvalue() == ""
