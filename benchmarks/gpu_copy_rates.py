"""Device-to-device copy rates on a GPU, to read bench_cuda's copy-rate bound against.

torch's ``Tensor.copy_`` (if torch is installed), numba's ``cuMemcpyDtoD`` and this backend's
copy kernel, each on 256 MiB and 4 GiB, timed with CUDA events after a warm-up. Prints terabytes
copied per second (memory traffic is twice that). Run on a GPU: ``python benchmarks/gpu_copy_rates.py``.
"""

from __future__ import annotations

import statistics

from commsim.exec.cuda import CudaBackend

SIZES = (2**28, 2**32)


def torch_rates() -> None:
    """torch's copy rate at each size, or one line saying torch is absent."""
    try:
        import torch
    except ImportError:
        print("torch absent")
        return
    for n in SIZES:
        a = torch.ones(n // 4, device="cuda")
        b = torch.empty_like(a)
        for _ in range(50):
            b.copy_(a)
        times = []
        for _ in range(20):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            b.copy_(a)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        print(f"torch copy_ {n >> 20} MiB: {n / statistics.median(times) / 1e12:.2f} TB/s copied")
        del a, b


def main() -> None:
    torch_rates()
    be = CudaBackend()
    for n in SIZES:
        dtod = be.copy_bandwidth(n, 20) / 1e12
        kernel = be.copy_bandwidth(n, 20, kernel=True) / 1e12
        print(
            f"numba cuMemcpyDtoD {n >> 20} MiB: {dtod:.2f} TB/s copied; copy kernel: {kernel:.2f} TB/s"
        )


if __name__ == "__main__":
    main()
