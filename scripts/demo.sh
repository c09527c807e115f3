#!/usr/bin/env bash
# Bootstrap .venv, then the demo:
#   1. predicted allreduce times, every algorithm x sizes x rank counts, winner per size;
#   2. the predicted winners run for real on 4 local MPI processes (mpi4jax), measured next to
#      predicted and next to the MPI library's own MPI_Allreduce.
#
#   scripts/demo.sh            # both
#   scripts/demo.sh --plot x.png  # extra arguments go to `commsim compare`
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
export MPI4JAX_NO_WARN_JAX_VERSION=1 JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
echo
echo "== 1. prediction: which allreduce algorithm wins where (commsim compare)"
.venv/bin/commsim compare -c allreduce -p 8,64,1024 --sizes 1KiB,1MiB,64MiB "$@"
echo
echo "== 2. the predicted winners for real, on 4 MPI processes (commsim validate)"
exec .venv/bin/commsim validate -c allreduce -p 4 --sizes 64KiB,1MiB,16MiB --iters 10
