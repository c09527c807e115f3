#!/usr/bin/env bash
# Every check that needs a GPU, in one run (a lent GPU's time is short: one call does it all).
#
#   bash benchmarks/gpu_checks.sh [OUTDIR]
#
# Uses the machine's own python3 (numba, numba-cuda, JAX with its CUDA plugin, networkx, pytest);
# commsim itself comes from this checkout (PYTHONPATH). Each part has its own time limit so that
# one hang cannot eat the others' time. Writes logs and JSON into OUTDIR (default: gpu-out).
# numba-cuda 0.30.4 does not import under numpy 2.5 (`np.row_stack` is gone): where the machine
# has that pair, put a numpy 2.4 first on PYTHONPATH (docs/benchmarks.md shows how).
#   1. the Numba-CUDA executor's tests on the real GPU (NUMBA_ENABLE_CUDASIM=0);
#   1b. every registry row and parameter case on the Numba-CUDA backend (tests/test_registry.py);
#   2. benchmarks/bench_cuda.py: ring and Rabenseifner allreduce, 8 ranks x 256 MiB, against the
#      bound from the measured copy rate;
#   3. benchmarks/bench_twin.py on JAX's GPU backend: the twin's vmapped what-if sweep;
#   4. the twin's tests (jit, vmap, grad against finite differences) on JAX's GPU backend.
set -u
out=${1:-${OUT:-gpu-out}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPI4JAX_NO_WARN_JAX_VERSION=1
py=${PYTHON:-python3}
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  $py - <<'EOF'
import platform, importlib.metadata as md
print("python", platform.python_version())
for name in ("numpy", "numba", "numba-cuda", "jax", "jaxlib", "jax-cuda13-plugin", "networkx"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "absent")
EOF
} 2>&1 | tee "$out/machine.txt"

echo "== 1. CUDA executor tests on the GPU"
NUMBA_ENABLE_CUDASIM=0 JAX_PLATFORMS=cpu timeout 240 $py -m pytest -q -p no:cacheprovider \
  tests/test_exec_cuda.py tests/test_exec_channels.py -k "cuda or Cuda" 2>&1 \
  | tee "$out/pytest_cuda.log" | tail -25

echo "== 1b. every registry row on the GPU (the registry sweep's cuda cases)"
NUMBA_ENABLE_CUDASIM=0 JAX_PLATFORMS=cpu timeout 300 $py -m pytest -q -p no:cacheprovider \
  tests/test_registry.py -k cuda 2>&1 | tee "$out/pytest_registry_cuda.log" | tail -15

echo "== 2. bench_cuda: 8 ranks x 256 MiB"
NUMBA_ENABLE_CUDASIM=0 JAX_PLATFORMS=cpu timeout 240 $py benchmarks/bench_cuda.py \
  --out "$out/cuda.json" 2>&1 | tee "$out/bench_cuda.log"

echo "== 2b. copy rates for comparison: torch (if present), numba, the copy kernel"
NUMBA_ENABLE_CUDASIM=0 JAX_PLATFORMS=cpu timeout 120 $py benchmarks/gpu_copy_rates.py 2>&1 \
  | tee "$out/copy_rates.log"

echo "== 3. bench_twin on JAX's GPU backend"
timeout 240 $py benchmarks/bench_twin.py 10 100 1000 10000 2>&1 | tee "$out/bench_twin.log"
echo "== 4. the twin's tests on JAX's GPU backend"
JAX_PLATFORMS=cuda timeout 180 $py -m pytest -q -p no:cacheprovider tests/test_twin.py 2>&1 \
  | tee "$out/pytest_twin_gpu.log" | tail -15
echo "== done"
