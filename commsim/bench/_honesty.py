"""When a validation is far off: say so, and say why it may be (issue #26, "honest validation").

A model validated on this machine is only as good as its parameters and the measurement it is
checked against. :func:`validation_warnings` flags every algorithm whose median |error| is above
:data:`ERROR_BOUND` (the bound ``docs/validation.md`` states) and names the likely causes it can
see: other jobs on the machine (the cores they kept busy during the run,
:class:`commsim.bench.OtherLoad`; else the load average), more ranks than cores, no measured profile,
a profile measured on another machine or long ago, or one without the ``step`` curve its suite
now measures (reductions then priced at γ alone).
"""

from __future__ import annotations

import datetime as dt
import os
import platform

from commsim.bench._machine import usable_cores
from commsim.bench._validate import ValidationSummary
from commsim.profiles import Profile

__all__ = ["ERROR_BOUND", "STALE_DAYS", "validation_warnings"]

#: Median |error| above which a validation is flagged: the bound docs/validation.md states.
ERROR_BOUND = 0.20
#: A profile older than this many days may no longer describe the machine.
STALE_DAYS = 30


def validation_warnings(
    summary: ValidationSummary,
    nranks: int,
    profile: Profile | None = None,
    *,
    load: float | None = None,
    now: dt.datetime | None = None,
) -> tuple[str, ...]:
    """The warnings of a validation: one per algorithm above :data:`ERROR_BOUND`, then the
    likely causes (nothing when every error is within the bound).

    Examples:
        >>> from commsim.bench import AlgorithmAccuracy, ValidationSummary
        >>> s = ValidationSummary((AlgorithmAccuracy("ring", 4, 0.45, 0.4, 0.05),), 0, 0)
        >>> [w.split(":")[0] for w in validation_warnings(s, 2, load=0.1)]
        ['ring', 'likely cause']
    """
    high = [a for a in summary.algorithms if a.median_abs_error > ERROR_BOUND]
    if not high:
        return ()
    out = [
        f"{a.algorithm}: median |error| {100 * a.median_abs_error:.0f}% is above the "
        f"{100 * ERROR_BOUND:.0f}% docs/validation.md states: these predictions are not "
        "validated on this machine now"
        for a in high
    ]
    cores = usable_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # not available here
            load = None
    if load is not None and load > 0.5 * cores:
        out.append(
            f"likely cause: the machine is busy (other jobs used {load:.1f} of {cores} cores "
            "during the run): they slow the measured runs; rerun on an idle machine"
        )
    if nranks > cores:
        out.append(f"likely cause: {nranks} ranks on {cores} cores are oversubscribed")
    if profile is None:
        out.append(
            "likely cause: no --profile: the model's parameters are defaults, not this "
            "machine's; run commsim calibrate and pass --profile"
        )
    else:
        host = platform.node()
        if host and host not in profile.machine:
            out.append(
                f"likely cause: the profile was measured on {profile.machine!r}, not on {host!r}"
            )
        try:
            when = dt.datetime.fromisoformat(profile.date)
        except ValueError:
            when = None
        if when is not None:
            today = now or dt.datetime.now(when.tzinfo)
            age = (today - when).days
            if age > STALE_DAYS:
                out.append(
                    f"likely cause: the profile is {age} days old ({profile.date}): recalibrate"
                )
        if "step" not in profile.curves and "step" in _suite_kinds(profile.backend):
            out.append(
                "likely cause: the profile has no step curve (written before calibrate timed "
                "one), so the Hockney model prices reductions at gamma alone, which misses what "
                "ranks pay to reduce inside a step (5x at 64 KiB on the 2-vCPU machine of "
                "docs/validation.md): recalibrate"
            )
    if len(out) == len(high):
        out.append(
            "likely cause: none this check can see (load, cores, profile look fine): compare "
            "two runs, and see docs/validation.md for where the model is known to be wrong "
            "(the model assumes a step's parts cost what calibrate timed in its own patterns; "
            "mpirun -n 2 python benchmarks/mpi_step_costs.py times an allreduce's step part by "
            "part on this machine)"
        )
    return tuple(out)


def _suite_kinds(backend: str) -> tuple[str, ...]:
    """The curves ``backend``'s calibration suite measures (none for a backend without one)."""
    from commsim.bench.calibrate import suite_of
    from commsim.errors import CommsimError

    try:
        return suite_of(backend).kinds
    except CommsimError:
        return ()
