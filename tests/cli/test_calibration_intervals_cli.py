"""``calibrate --blocks`` and ``validate``'s interval of the median error on the command line."""

from __future__ import annotations

import numpy as np


def test_validate_json_carries_the_interval_of_the_median_error(cli_json):
    doc = cli_json("validate", "-c", "allreduce", "-p", "2", "-a", "ring", "-s", "64KiB,1MiB",
                   "--backend", "numpy", "--iters", "5", "--warmup", "0")  # fmt: skip
    row = doc["summary"]["algorithms"][0]
    lo, hi = row["error_interval"]
    assert 0 <= lo <= hi and np.isfinite(hi)
    assert doc["results"][0]["iters"] == 5


def test_calibrate_refuses_repeats_that_do_not_split_into_the_blocks(cli):
    code, _, err = cli("calibrate", "-p", "2", "--repeats", "7", "--blocks", "5")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--repeats 7 do not split into --blocks 5" in err
