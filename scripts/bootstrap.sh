#!/usr/bin/env bash
# Create or refresh the development virtualenv in .venv (idempotent).
#
#   scripts/bootstrap.sh            # install what is missing; ~instant when nothing changed
#   scripts/bootstrap.sh --force    # redo the install steps even if the stamp says up to date
#
# Needs only a Python >= 3.10 and a C/C++ compiler; everything else comes from PyPI. MPI comes from
# the `mpich` wheel, which puts mpirun/mpicc/libmpi inside .venv; mpi4jax is compiled from source
# against that mpicc, so the whole MPI stack lives in .venv and nothing is taken from the system.
#
# Environment:
#   PYTHON=python3.12          interpreter used to create .venv (default: python3 on PATH)
#   COMMSIM_EXTRAS=mpi,dev     extras of commsim to install (add `notebooks` for Jupyter)
#   COMMSIM_MPI4JAX_CUDA=auto  build mpi4jax's CUDA bridge: 1, 0, or auto (= only if an NVIDIA
#                              device node exists). Only useful with a CUDA jaxlib; doubles the
#                              mpi4jax compile time.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=$ROOT/.venv
VPY=$VENV/bin/python
STAMP=$VENV/.commsim-installed
PYTHON=${PYTHON:-python3}
EXTRAS=${COMMSIM_EXTRAS:-mpi,dev}
MPI4JAX_CUDA=${COMMSIM_MPI4JAX_CUDA:-auto}
FORCE=0
for arg in "$@"; do
    case $arg in
        --force) FORCE=1 ;;
        -h | --help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bootstrap: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

log() { printf '[bootstrap] %s\n' "$*"; }
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }
T0=$(now)
export MPI4JAX_NO_WARN_JAX_VERSION=1  # mpi4jax warns on import when JAX is newer than it knows

# This machine's pip config may list local indexes that lack most projects; pip then prints one
# "Location ... is ignored" warning per package. Drop that noise, keep everything else.
PIP_NOISE="^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$"
pip_() { "$VPY" -m pip --disable-pip-version-check "$@" 2>&1 | { grep -v -E "$PIP_NOISE" || true; }; }

# ---------------------------------------------------------------- interpreter
command -v "$PYTHON" >/dev/null 2>&1 \
    || die "'$PYTHON' not found on PATH; install Python >= 3.10 or set PYTHON=/path/to/python3"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "Python >= 3.10 required, but $PYTHON is $("$PYTHON" -c 'import sys; print(sys.version.split()[0])'); set PYTHON=/path/to/python3.10+"

want_mpi=0
[[ ",$EXTRAS," == *,mpi,* ]] && want_mpi=1

case $MPI4JAX_CUDA in
    auto) if [[ -e /dev/nvidiactl || -e /dev/nvidia0 ]]; then MPI4JAX_CUDA=1; else MPI4JAX_CUDA=0; fi ;;
    0 | 1) ;;
    *) die "COMMSIM_MPI4JAX_CUDA must be 0, 1 or auto, not '$MPI4JAX_CUDA'" ;;
esac

# Everything that should trigger a reinstall when it changes.
key=$("$PYTHON" - "$EXTRAS" "$MPI4JAX_CUDA" <<'EOF'
import hashlib, sys
h = hashlib.sha256()
for path in ("pyproject.toml", "scripts/bootstrap.sh"):
    with open(path, "rb") as f:
        h.update(f.read())
h.update(repr((sys.version, sys.argv[1:])).encode())
print(h.hexdigest())
EOF
)

# Serialize concurrent bootstraps (e.g. scripts/test.sh and scripts/demo.sh started together).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$ROOT/.venv.lock"
    flock 9
fi

if [[ $FORCE == 0 && -f $STAMP && "$(cat "$STAMP")" == "$key" ]] && "$VPY" -c '' 2>/dev/null; then
    log "up to date ($VENV)"
    exit 0
fi

# ---------------------------------------------------------------- virtualenv
if ! "$VPY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    [[ -e $VENV ]] && { log "removing unusable $VENV"; rm -rf "$VENV"; }
    log "creating $VENV with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    "$PYTHON" -m venv "$VENV" \
        || die "'$PYTHON -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi
rm -f "$STAMP"

log "upgrading pip"
pip_ install -q --upgrade pip

if [[ $want_mpi == 1 ]]; then
    # 1. MPI (mpich wheel: .venv/bin/mpicc, .venv/bin/mpirun, .venv/lib/libmpi.so) plus what
    #    mpi4jax needs to build without isolation (it compiles against jaxlib's XLA FFI headers).
    log "installing mpich, mpi4py, jax and mpi4jax's build requirements"
    pip_ install -q "setuptools>=82.0.1" wheel "nanobind>=2" mpich "mpi4py>=4" "jax>=0.6" "jaxlib>=0.6"
    [[ -x $VENV/bin/mpicc && -x $VENV/bin/mpirun ]] \
        || die "the mpich wheel did not provide $VENV/bin/mpicc and mpirun"

    # 2. mpi4jax from source, against the venv's mpicc. Without MPI4JAX_BUILD_MPICC its setup.py
    #    looks for `mpicc` on PATH (wrong MPI, or none). CUDA: its setup.py takes the CUDA root
    #    from CUDA_PATH, else from the directory above `nvcc` (wrong when nvcc is a wrapper in
    #    /usr/local/bin and the headers live in /usr/local/cuda), so always set CUDA_PATH; an empty
    #    directory means "no CUDA" and skips the CUDA bridge. --no-cache-dir: a cached wheel
    #    carries an rpath into the venv that built it.
    if "$VPY" -c 'import mpi4jax' 2>/dev/null; then
        log "mpi4jax already built ($("$VPY" -c 'import mpi4jax; print(mpi4jax.__version__)'))"
    else
        nocuda=$(mktemp -d)
        trap 'rm -rf "$nocuda"' EXIT
        cuda_path=$nocuda
        if [[ $MPI4JAX_CUDA == 1 ]]; then
            for d in "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
                if [[ -n $d && -f $d/include/cuda_runtime.h ]]; then cuda_path=$d; break; fi
            done
            [[ $cuda_path == "$nocuda" ]] && log "warning: no CUDA headers found; building mpi4jax without CUDA"
        fi
        log "building mpi4jax from source (1-3 min; CUDA bridge: $([[ $cuda_path == "$nocuda" ]] && echo no || echo "yes, $cuda_path"))"
        t=$(now)
        MPI4JAX_BUILD_MPICC=$VENV/bin/mpicc CUDA_PATH=$cuda_path CUDA_ROOT='' PATH="$VENV/bin:$PATH" \
            pip_ install -q --no-build-isolation --no-cache-dir "mpi4jax>=0.8"
        log "mpi4jax built in $(($(now) - t)) s"
    fi
fi

# 3. commsim itself, editable, with its extras (setuptools is already in the venv).
log "installing commsim (editable) with extras [$EXTRAS]"
# (PYTHONWARNINGS: hush setuptools' banner about editable installs shadowing same-named folders)
PYTHONWARNINGS="ignore:Editable installation" pip_ install -q --no-build-isolation -e ".[$EXTRAS]"

# ---------------------------------------------------------------- verify
log "verifying imports"
"$VPY" -c 'import jax, numba, networkx, numpy, matplotlib' || die "core imports failed"
if [[ $want_mpi == 1 ]]; then
    "$VPY" -c 'import mpi4py, mpi4jax' || die "mpi4py/mpi4jax import failed"
    log "verifying mpirun -n 2 with an mpi4jax allreduce"
    out=$(JAX_PLATFORMS=cpu MPI4JAX_NO_WARN_JAX_VERSION=1 timeout 120 \
        "$VENV/bin/mpirun" -n 2 "$VPY" -c '
from mpi4py import MPI
import jax.numpy as jnp, mpi4jax
comm = MPI.COMM_WORLD
total = mpi4jax.allreduce(jnp.full(3, comm.rank + 1.0), op=MPI.SUM, comm=comm)
assert total.tolist() == [3.0, 3.0, 3.0], total
print(f"rank {comm.rank}/{comm.size} ok", flush=True)
' </dev/null 2>&1) || die "mpirun -n 2 check failed:
$out"
    # (count matches, not lines: mpirun may interleave the ranks' output within a line)
    [[ $(grep -o 'rank [01]/2 ok' <<<"$out" | sort -u | wc -l) == 2 ]] || die "expected 2 ranks from mpirun -n 2, got:
$out"
fi

echo "$key" >"$STAMP"
log "done in $(($(now) - T0)) s: $("$VPY" -c 'import sys, jax, numba; print(f"python {sys.version.split()[0]}, jax {jax.__version__}, numba {numba.__version__}", end="")')$([[ $want_mpi == 1 ]] && "$VPY" -c 'import mpi4jax, mpi4py; print(f", mpi4py {mpi4py.__version__}, mpi4jax {mpi4jax.__version__}", end="")')"
log "activate with: source .venv/bin/activate"
