#!/usr/bin/env bash
# Bootstrap .venv, then the demo:
#   1. calibrate: measure this machine's MPI transport on 2 processes, fit the models to it;
#   2. validate: ring, Rabenseifner and recursive doubling allreduce for real on 2 MPI
#      processes (mpi4py on numpy buffers, as the calibration times the transport; --backend
#      mpi runs them through mpi4jax inside jax.jit, whose own cost docs/validation.md
#      measures), beside the calibrated prediction, the error and the ranking;
#   3. prediction on a cluster you do not have: a 128-node DGX H100 cluster, which algorithm
#      wins at each size and which link limits it (the defaults' numbers, docs/clusters.md).
#
#   scripts/demo.sh               # all three
#   scripts/demo.sh --plot x.png  # extra arguments go to `commsim compare`
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
export MPI4JAX_NO_WARN_JAX_VERSION=1 JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
out=${COMMSIM_DEMO_DIR:-demo-output}
mkdir -p "$out"
echo
echo "== 1. calibrate this machine's transport (commsim calibrate -> $out/profile.toml)"
.venv/bin/commsim calibrate -p 2 -o "$out/profile.toml" --plot "$out/profile.png"
echo
echo "== 2. measured vs predicted with that profile, on 2 MPI processes (commsim validate)"
.venv/bin/commsim validate -c allreduce -p 2 -a ring,rabenseifner,recursive_doubling \
    --sizes 1KiB,64KiB..64MiB:x4 --iters 10 --profile "$out/profile.toml" --backend mpi4py \
    --plot "$out/validate.png"
echo
echo "== 3. a cluster you do not have: 1024 H100s in 128 DGX nodes (commsim compare)"
exec .venv/bin/commsim compare -c allreduce --cluster dgx-h100:128 --sizes 1KiB,1MiB,64MiB,1GiB "$@"
