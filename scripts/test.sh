#!/usr/bin/env bash
# Run everything CI runs: bootstrap, lint, the pytest suite, then the MPI tests under mpirun.
#
#   scripts/test.sh                 # all of it
#   scripts/test.sh -k ring -x      # extra arguments go to every pytest run
#
# Every part runs even if an earlier one failed; the exit status is non-zero if any part failed.
# Environment (defaults in brackets, a value set by the caller wins):
#   NUMBA_ENABLE_CUDASIM [1]  set to 0 on a machine with a GPU to run the `gpu` tests for real
#   JAX_PLATFORMS [cpu]       the JAX-mesh tests use 8 fake CPU devices (XLA_FLAGS)
#   COMMSIM_MPI_SIZES ["2 4"] world sizes for tests/mpi; COMMSIM_MPI_TIMEOUT [600] s per mpirun
#   COMMSIM_TEST_WORKERS [auto]  pytest-xdist workers for the main suite (one per core; 0: no
#                             workers, everything in this process, e.g. to debug with -x --pdb)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh

VENV=$PWD/.venv
export PATH="$VENV/bin:$PATH"
if [[ ${XLA_FLAGS:-} != *xla_force_host_platform_device_count* ]]; then
    export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_force_host_platform_device_count=8"
fi
export NUMBA_ENABLE_CUDASIM=${NUMBA_ENABLE_CUDASIM:-1}
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
export MPI4JAX_NO_WARN_JAX_VERSION=1
MPI_SIZES=${COMMSIM_MPI_SIZES:-2 4}
MPI_TIMEOUT=${COMMSIM_MPI_TIMEOUT:-600}
PYTEST=("$VENV/bin/python" -m pytest -q -p no:cacheprovider)

failed=()
# part NAME OK_CODES CMD...: run CMD, report its time and status; OK_CODES e.g. "0" or "0 5".
part() {
    local name=$1 ok=$2 rc=0 t=$SECONDS
    shift 2
    printf '\n==> %s\n' "$name"
    "$@" || rc=$?
    if [[ " $ok " == *" $rc "* ]]; then
        printf '<== %s: ok (%d s)\n' "$name" $((SECONDS - t))
    else
        printf '<== %s: FAILED, exit %d (%d s)\n' "$name" "$rc" $((SECONDS - t))
        failed+=("$name")
    fi
}

part "ruff check" 0 ruff check .
part "ruff format --check" 0 ruff format --check .
# Exit 5 (nothing collected) is a failure here: an empty run must not pass CI.
# The suite runs on every core (pytest-xdist); --durations lists the slowest tests, to keep it short.
part "pytest" 0 "${PYTEST[@]}" -n "${COMMSIM_TEST_WORKERS:-auto}" --durations=30 "$@"

# tests/mpi: the same files under mpirun (they also ran above, at world size 1). Exit 5 is fine
# here, e.g. when `-k` deselects every MPI test. `timeout` turns a deadlock into a failure.
if compgen -G "tests/mpi/test_*.py" >/dev/null || compgen -G "tests/mpi/*_test.py" >/dev/null; then
    for n in $MPI_SIZES; do
        part "mpirun -n $n pytest tests/mpi" "0 5" \
            timeout -k 20 "$MPI_TIMEOUT" mpirun -n "$n" "${PYTEST[@]}" tests/mpi "$@" </dev/null
    done
else
    printf '\n(no tests in tests/mpi: skipping the mpirun runs)\n'
fi

echo
if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "all checks passed"
