"""Score commsim against the published nccl-tests logs of this folder (docs/validation.md).

For every log, with the preset of its hardware, five predictions, each through the CLI:

* **spec-only, default**: ``commsim validate --from-nccl-tests LOG --cluster PRESET`` (the
  NCCL-like algorithm of ``commsim.algorithms.NCCL_ALGORITHMS``, links as specified);
* **spec-only, best**: ``commsim compare -c allreduce --cluster PRESET --protocol auto -s SIZES``,
  the fastest algorithm x protocol per size of every algorithm commsim has (one channel);
* **spec-only, auto**: ``commsim validate --from-nccl-tests LOG --cluster PRESET -a auto``, the
  NCCL-like pick per size: ring or tree x protocol x 1, 2, 4, 8 channels spread over the NICs
  ("what would NCCL do", issue #19 item 10);
* **spec-only, auto, link rule**: the same with ``--port-rule link``: a rank drives NVLink and
  its NIC at once, a queue per host link (docs/sharp-bits.md, "Ports and links"), as NCCL's
  pipelined NVLSTree does;
* **calibrated**: ``commsim calibrate --from-nccl-tests LOG --cluster PRESET -o FIT`` on the rows
  up to 16 MiB, then ``commsim validate --from-nccl-tests LOG --cluster FIT`` on the rows of
  64 MiB and up (only where the log has rows on both sides).

Prints the median |error| and the worst size of each, per log, and for ``-a auto`` the picks and
the acceptance check (median |error| <= 20 %, no row off by more than 2x). Run from the
repository root: ``python examples/nccl-tests/published/score.py`` (about a minute per
multi-node log; a few minutes for the 72-rank GB200 log).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from commsim import units

HERE = Path(__file__).parent

#: log file -> the preset of its hardware (the closest one commsim has; docs/validation.md says
#: where the hardware differs from the preset)
PRESETS = {
    "nccl-tests-290-h100-1node-all_reduce.log": "dgx-h100:1",
    "nccl-tests-290-h100-2node-ring-all_reduce.log": "dgx-h100:2",
    "gcp-a3mega-h100-2node-all_reduce.log": "dgx-h100:2",
    "oci-h200-2node-all_reduce.log": "dgx-h200:2",
    "oci-h100-2node-all_reduce.log": "dgx-h100:2",
    "oci-a100-1node-all_reduce.log": "dgx-a100:1",
    "oci-a100-2node-all_reduce.log": "dgx-a100:2",
    "coreweave-gb200-nvl72-all_reduce.log": "gb200-nvl72:1",
    "gcp-a4-b200-1node-all_reduce.log": "dgx-b200:1",
    "gcp-a4-b200-2node-all_reduce.log": "dgx-b200:2",
}
#: logs that do not name their binary (their headers say how the collective is known)
EXTRA = {
    name: ("--collective", "allreduce")
    for name in (
        "coreweave-gb200-nvl72-all_reduce.log",
        "gcp-a4-b200-1node-all_reduce.log",
        "gcp-a4-b200-2node-all_reduce.log",
    )
}
FIT_UP_TO = 16 << 20
HELD_OUT_FROM = 64 << 20


def _commsim(*args: str) -> dict:
    """``python -m commsim ARGS --json``, parsed."""
    out = subprocess.run(
        [sys.executable, "-m", "commsim", *args, "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def _worst(sizes: np.ndarray, err: np.ndarray) -> str:
    """``median |e| (worst: SIZE e)`` of signed relative errors ``err`` at ``sizes``."""
    i = int(np.argmax(np.abs(err)))
    worst = f"{units.format_size(int(sizes[i]))} {100 * err[i]:+.0f}%"
    return f"{100 * np.median(np.abs(err)):.1f}% (worst {worst})"


def score(name: str, preset: str) -> str:
    """One log's scores, one line each."""
    log = str(HERE / name)
    extra = EXTRA.get(name, ())
    doc = _commsim("validate", "--from-nccl-tests", log, "--cluster", preset, *extra)
    rows = doc["rows"]
    sizes = np.array([r["size"] for r in rows])
    measured = np.array([r["measured_s"] for r in rows])
    default = np.array([r["error"] for r in rows])
    spec = ",".join(str(int(s)) for s in sizes)
    cmp = _commsim(
        "compare", "-c", "allreduce", "--cluster", preset, "--protocol", "auto", "-s", spec
    )
    times = np.array(list(cmp["results"][0]["time_s"].values()), dtype=float)
    best = np.nanmin(times, axis=0) / measured - 1
    res = cmp["results"][0]
    picks = sorted({f"{w}/{p}" for w, p in zip(res["winner"], res["winner_protocol"], strict=True)})
    parts = [f"{name} on {preset} ({len(sizes)} rows, {doc['log']['nranks']} ranks)",
             f"  spec default: {_worst(sizes, default)}",
             f"  spec best (compare --protocol auto): {_worst(sizes, best)}; picks {', '.join(picks)}",
             _auto(log, preset, extra),
             _auto(log, preset, (*extra, "--port-rule", "link"))]  # fmt: skip
    fit, held = sizes <= FIT_UP_TO, sizes >= HELD_OUT_FROM
    if fit.sum() >= 3 and held.any():
        with tempfile.TemporaryDirectory() as tmp:
            fitted = str(Path(tmp) / "fit.toml")
            _commsim(
                "calibrate", "--from-nccl-tests", log, "--cluster", preset, "-o", fitted, *extra
            )
            rows = _commsim("validate", "--from-nccl-tests", log, "--cluster", fitted, *extra)[
                "rows"
            ]
        err = np.array([r["error"] for r in rows])[held]
        parts.append(f"  calibrated (fit <= 16MiB, held out >= 64MiB): {_worst(sizes[held], err)}")
    else:
        parts.append(
            f"  calibrated: n/a ({int(fit.sum())} rows <= 16MiB, {int(held.sum())} >= 64MiB)"
        )
    return "\n".join(parts)


def _auto(log: str, preset: str, extra: tuple[str, ...]) -> str:
    """The ``-a auto`` line: its error, its picks, and whether the acceptance holds."""
    rows = _commsim(
        "validate", "--from-nccl-tests", log, "--cluster", preset, "-a", "auto", *extra
    )["rows"]
    sizes = np.array([r["size"] for r in rows])
    err = np.array([r["error"] for r in rows])
    picks = dict.fromkeys(
        f"{p['algorithm']} x{p['channels']} {p['protocol']}" for p in (r["pick"] for r in rows)
    )
    ratio = 1 + err
    ok = np.median(np.abs(err)) <= 0.20 and np.all((ratio <= 2) & (ratio >= 0.5))
    label = "validate -a auto" + (" --port-rule link" if "--port-rule" in extra else "")
    return (
        f"  spec auto ({label}): {_worst(sizes, err)}; picks {', '.join(picks)}; "
        f"acceptance (median <= 20%, none off by > 2x): {'met' if ok else 'not met'}"
    )


def main() -> None:
    """Score every log named on the command line, or all of them."""
    names = sys.argv[1:] or list(PRESETS)
    for name in names:
        print(score(name, PRESETS[name]), flush=True)


if __name__ == "__main__":
    main()
