"""What a measured profile costs the Hockney model: γ alone, a step curve, a piecewise message.

Times ``predict`` of ring allgather and ring allreduce at ``p`` ranks over 17 sizes (1 KiB ..
64 MiB) under four Hockney models that differ only in what they read from a profile:

* ``gamma``: one α, β and γ (the compiled fast paths);
* ``step``: the same α, β with a measured reduction in a step
  (:class:`commsim.profiles.StepReduction`): the steps that reduce take the numpy path;
* ``message``: a 3-piece message curve with γ (every step on the numpy path);
* ``both``: the message curve and the step reduction (a profile ``calibrate`` writes).

With ``--profile FILE`` the curves are that profile's; without, synthetic ones (so the script
needs no calibration). Each model runs twice; the second time is the steady state::

    python benchmarks/bench_profile_models.py            # p = 2048
    python benchmarks/bench_profile_models.py -p 4096 --profile profile.toml
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import commsim
from commsim.models import Hockney
from commsim.profiles import Piece, PiecewiseLinear, StepReduction, load_profile


def _curves(path: str | None) -> tuple[PiecewiseLinear, StepReduction]:
    if path:
        profile = load_profile(path)
        red = profile.step_reduction()
        if red is None:
            raise SystemExit(f"{path}: no step curve (recalibrate)")
        return profile.message_curve().fit, red
    message = PiecewiseLinear(
        (Piece(0, 2e-6, 1 / 5e9), Piece(8192, 4e-6, 1 / 7e9), Piece(2**21, 0.0, 1 / 9e9))
    )
    step = PiecewiseLinear((Piece(0, 2.5e-6, 1 / 4e9), Piece(8192, 6e-6, 1 / 1.5e9)))
    alone = PiecewiseLinear.hockney(0.7e-6, 1 / 30e9)
    return message, StepReduction(step, message, alone)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-p", "--nranks", type=int, default=2048)
    ap.add_argument("--profile", default=None, help="a calibrate profile with a step curve")
    args = ap.parse_args(argv)
    message, red = _curves(args.profile)
    alpha, beta = message.alpha_min, message.beta_min
    models = {
        "gamma": Hockney(alpha=alpha, beta=beta, gamma=red.gamma),
        "step": Hockney(alpha=alpha, beta=beta, reduction=red),
        "message": Hockney(message=message, gamma=red.gamma),
        "both": Hockney(message=message, reduction=red),
    }
    sizes = 2.0 ** np.arange(10, 27)
    print(f"| collective (ring, p={args.nranks}) | model | first | second |")
    print("|---|---|---|---|")
    for collective in ("allgather", "allreduce"):
        s = commsim.build(collective, "ring", nranks=args.nranks)
        for name, m in models.items():
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                m.predict(s, sizes)
                times.append(time.perf_counter() - t0)
            print(f"| {collective} | {name} | {times[0]:.2f} s | {times[1]:.2f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
