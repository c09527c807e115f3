r"""Data-parallel SGD with a commsim allreduce: a small MLP trained on a synthetic task.

Every step, each of ``p`` workers computes the gradient of the mean loss on its shard of the
global batch, and an allreduce averages the gradients (Horovod's ``DistributedOptimizer``, PyTorch
DDP): with equal shards the average is exactly the full-batch gradient, so data-parallel SGD
follows the same trajectory as single-process SGD on the whole batch, up to float32
reassociation. The allreduce is any commsim schedule (``--algorithm ring``, ``rabenseifner``, ...)
or ``auto`` (the tuner's choice per gradient bucket, by the cost model), dropped into the program
where ``lax.pmean`` / ``MPI_Allreduce`` would be.

Two ways to run it, and a single-process reference::

    python examples/data_parallel_sgd.py --backend jax                # 8 JAX devices (CPU here)
    mpirun -n 4 python examples/data_parallel_sgd.py --backend mpi    # 4 MPI processes (mpi4jax)
    python examples/data_parallel_sgd.py --backend single             # full-batch SGD, one process

Per epoch it prints the loss, the accuracy, the step time and the share of the step spent in the
gradient allreduce (the allreduce of the same gradients timed alone, divided by the step time).
At the end it predicts the communication time of the same gradient buckets on a cluster
(``--cluster dgx-h100:128``: 1024 H100s): what this model's allreduce would cost there.

``--compression fp16|bf16|int8`` sends every gradient message of the commsim allreduce in that
format (int8 with a scale per 256 elements and an error-feedback residual; ``docs/compression.md``),
trains once more with exact float32 messages, prints both final losses, and with ``--plot FILE``
draws both loss curves into a PNG::

    python examples/data_parallel_sgd.py --compression int8 --plot int8.png

``--check`` trains three times with the same seed (the commsim allreduce, the backend's own
collective, and single-process full-batch SGD) and prints the largest loss difference; the tests
run it. The task is made in numpy (Gaussian clusters, no downloads).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

if "--backend" in sys.argv and "jax" in sys.argv and "XLA_FLAGS" not in os.environ:
    # CPU devices must be asked for before JAX starts (one per data-parallel worker).
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("MPI4JAX_NO_WARN_JAX_VERSION", "1")

import jax
import jax.numpy as jnp

import commsim
from commsim import units

Params = dict[str, jax.Array]
History = list[dict[str, float]]


# -- the task and the model ----------------------------------------------------------------------
def make_task(
    n: int, features: int = 32, classes: int = 8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in ``features`` dimensions from ``classes`` Gaussian clusters (float32, int32)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 0.5, (classes, features))  # overlapping: accuracy ~85%
    y = rng.integers(0, classes, n).astype(np.int32)
    x = centres[y] + rng.normal(0.0, 1.0, (n, features))
    return x.astype(np.float32), y


def init_mlp(sizes: tuple[int, ...], seed: int = 0) -> Params:
    """Weights ``w{i}`` (He-scaled normal) and biases ``b{i}`` (zeros) of an MLP, made in numpy so
    that every worker and every backend starts from the same bits."""
    rng = np.random.default_rng(seed + 1)
    params = {}
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        params[f"w{i}"] = jnp.asarray(rng.normal(0.0, np.sqrt(2.0 / a), (a, b)), jnp.float32)
        params[f"b{i}"] = jnp.zeros((b,), jnp.float32)
    return params


def layers(args: argparse.Namespace) -> tuple[int, ...]:
    """Layer widths: features, two hidden layers, classes."""
    return (args.features, args.hidden, args.hidden, args.classes)


def logits(params: Params, x: jax.Array) -> jax.Array:
    n = len(params) // 2
    for i in range(n):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < n - 1:
            x = jax.nn.relu(x)
    return x


def loss_fn(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy over the (local) batch."""
    logp = jax.nn.log_softmax(logits(params, x))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def accuracy(params: Params, x: np.ndarray, y: np.ndarray) -> float:
    return float(jnp.mean(jnp.argmax(logits(params, jnp.asarray(x)), axis=1) == y))


def sgd(params: Params, grads: Params, lr: float) -> Params:
    return jax.tree.map(lambda w, g: w - lr * g, params, grads)


# -- one training loop, three ways to average gradients ------------------------------------------
class Run:
    """What a backend provides: a jitted ``step(params, x, y) -> (params, loss)`` over the global
    batch, the gradient allreduce alone (for the communication share), and its world."""

    def __init__(
        self,
        step: Callable[..., Any],
        allreduce: Callable[[Params], Params] | None,
        workers: int,
        rank: int = 0,
    ) -> None:
        self.step, self.allreduce, self.workers, self.rank = step, allreduce, workers, rank


def _gradient_allreduce(args: argparse.Namespace, workers: int, native: bool) -> Any:
    """The schedule (or ``"auto"`` and its tuner table) the commsim allreduce uses."""
    if native:
        return None
    if args.algorithm == "auto":
        table = commsim.tune("allreduce", tuning_model(args), nranks=workers, sizes=args.tune_sizes)
        return table
    return commsim.build("allreduce", args.algorithm, nranks=workers)


def tuning_model(args: argparse.Namespace) -> Any:
    """The model ``auto`` tunes with: a calibrated profile of this machine when given."""
    if args.profile:
        return args.profile
    return commsim.models.Hockney()


def jax_run(args: argparse.Namespace, native: bool) -> Run:
    """Data-parallel over ``args.devices`` JAX devices: ``shard_map`` over a mesh axis ``data``;
    the batch is sharded, the parameters replicated."""
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    p = args.devices
    devices = jax.devices()[:p]
    if len(devices) < p:
        raise SystemExit(f"--devices {p}: only {len(devices)} JAX devices are visible")
    mesh = Mesh(np.array(devices), ("data",))
    choice = _gradient_allreduce(args, p, native)

    def make(feedback: bool | None) -> Any:
        if native:
            return lambda g: jax.tree.map(lambda a: lax.pmean(a, "data"), g)
        if isinstance(choice, commsim.Schedule):
            return commsim.exec.jax.collective(
                choice, axis_name="data", mean=True, bucket_bytes=args.bucket_bytes,
                compression=args.compression, error_feedback=feedback,
            )  # fmt: skip
        return commsim.exec.jax.collective(
            "auto", axis_name="data", mean=True, tuner=choice, collective="allreduce",
            bucket_bytes=args.bucket_bytes, compression=args.compression,
            error_feedback=feedback,
        )  # fmt: skip

    average = make(None)
    feeds_back = getattr(average, "error_feedback", False)

    def local_step(
        params: Params, residual: Params, x: jax.Array, y: jax.Array
    ) -> tuple[Params, jax.Array, Params]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        if feeds_back:  # the residual is per device: [1, ...] here, [p, ...] outside
            mine = jax.tree.map(lambda r: r[0], residual)
            grads, mine = average.feedback(grads, mine)
            residual = jax.tree.map(lambda r: r[None], mine)
        else:
            grads = average(grads)
        return sgd(params, grads, args.lr), lax.pmean(loss, "data"), residual

    step = jax.jit(
        jax.shard_map(
            local_step, mesh=mesh, in_specs=(P(), P("data"), P("data"), P("data")),
            out_specs=(P(), P(), P("data")), check_vma=False,
        )
    )  # fmt: skip
    plain = make(False)  # the allreduce alone, for its time (no residual to thread)
    comm = jax.jit(jax.shard_map(plain, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False))
    batch = NamedSharding(mesh, P("data"))
    state: dict[str, Any] = {}

    def placed_step(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[Params, jax.Array]:
        if "residual" not in state:
            state["residual"] = jax.device_put(
                jax.tree.map(lambda w: jnp.zeros((p, *w.shape), w.dtype), params), batch
            )
        params, loss, state["residual"] = step(
            params, state["residual"], jax.device_put(x, batch), jax.device_put(y, batch)
        )
        return params, loss

    return Run(placed_step, comm, p)


def mpi_run(args: argparse.Namespace, native: bool) -> Run:
    """Data-parallel over the MPI processes (``mpirun -n N``): rank ``r`` takes the ``r``-th
    contiguous slice of every global batch; gradients are averaged with mpi4jax underneath."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    p, rank = comm.size, comm.rank
    choice = _gradient_allreduce(args, p, native)
    if native:
        import mpi4jax

        def average(g: Params) -> Params:
            return jax.tree.map(lambda a: mpi4jax.allreduce(a, op=MPI.SUM, comm=comm) / p, g)

    elif isinstance(choice, commsim.Schedule):
        average = commsim.exec.mpi.collective(
            choice, comm=comm, mean=True, bucket_bytes=args.bucket_bytes,
            compression=args.compression,
        )  # fmt: skip
    else:
        average = commsim.exec.mpi.collective(
            "auto", comm=comm, mean=True, tuner=choice, collective="allreduce",
            bucket_bytes=args.bucket_bytes, compression=args.compression,
        )  # fmt: skip
    feeds_back = getattr(average, "error_feedback", False)

    @jax.jit
    def local_step(
        params: Params, residual: Params, x: jax.Array, y: jax.Array
    ) -> tuple[Params, jax.Array, Params]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        if feeds_back:
            grads, residual = average.feedback(grads, residual)
        else:
            grads = average(grads)
        return sgd(params, grads, args.lr), loss, residual

    state: dict[str, Any] = {}

    def step(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[Params, jax.Array]:
        n = len(x) // p
        residual = state.get("residual", jax.tree.map(jnp.zeros_like, params))
        params, loss, state["residual"] = local_step(
            params, residual, x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]
        )
        return params, jnp.asarray(comm.allreduce(float(loss)) / p)  # the global batch's loss

    timed = average.feedback if feeds_back else average
    return Run(step, jax.jit(lambda g: timed(g)[0] if feeds_back else timed(g)), p, rank)


def single_run(args: argparse.Namespace) -> Run:
    """Single-process SGD on the whole global batch: what data-parallel SGD must reproduce."""

    @jax.jit
    def step(params: Params, x: jax.Array, y: jax.Array) -> tuple[Params, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return sgd(params, grads, args.lr), loss

    return Run(step, None, 1)


def _comm_time(run: Run, params: Params, repeats: int = 5) -> float:
    """Median time of the gradient allreduce alone, on gradient-shaped data."""
    if run.allreduce is None:
        return 0.0
    jax.block_until_ready(run.allreduce(params))  # compile
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(run.allreduce(params))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def train(args: argparse.Namespace, run: Run, quiet: bool = False) -> History:
    """``args.steps`` SGD steps over ``args.epochs`` epochs (batches in a fixed order); returns
    per-step losses and per-epoch metrics."""
    x, y = make_task(args.samples, args.features, args.classes, seed=args.seed)
    params = init_mlp(layers(args), seed=args.seed)
    batch = args.batch
    if batch % max(run.workers, 1):
        raise SystemExit(f"--batch {batch} must divide among {run.workers} workers")
    per_epoch = max(1, args.steps // args.epochs)
    history: History = []
    step = 0
    for epoch in range(args.epochs):
        times = []
        for b in range(per_epoch):
            lo = (b * batch) % (len(x) - batch + 1)
            t = time.perf_counter()
            params, loss = run.step(params, x[lo : lo + batch], y[lo : lo + batch])
            loss = float(jax.block_until_ready(loss))
            times.append(time.perf_counter() - t)
            history.append({"step": step, "loss": loss})
            step += 1
        step_time = float(np.median(times[1:] or times))  # the first step compiles
        comm = _comm_time(run, params)
        acc = accuracy(params, x, y)
        history.append({"epoch": epoch, "step_time": step_time, "comm": comm, "accuracy": acc})
        if not quiet and run.rank == 0:
            share = f"{min(comm / step_time, 1.0):6.1%}" if comm else "     –"
            print(
                f"epoch {epoch}: loss {loss:.4f}  accuracy {acc:6.1%}  "
                f"step {units.format_time(step_time):>9}  communication {share}",
                flush=True,
            )
    return history


def losses(history: History) -> np.ndarray:
    return np.array([h["loss"] for h in history if "loss" in h])


# -- what the same gradients would cost on a cluster ---------------------------------------------
def gradient_buckets(params: Params, bucket_bytes: int | None) -> list[int]:
    """Bytes per bucket as the drop-in packs the gradient leaves (:func:`commsim.exec.buckets`:
    by dtype, then in pytree order into buckets of at most ``bucket_bytes``)."""
    leaves = jax.tree.leaves(params)
    sizes = [int(a.size) * a.dtype.itemsize for a in leaves]
    groups = commsim.exec.buckets([a.dtype for a in leaves], sizes, bucket_bytes)
    return [sum(sizes[i] for i in g) for g in groups]


def predict_on_cluster(args: argparse.Namespace, params: Params) -> None:
    """Print the tuner's choice and predicted time for every gradient bucket on ``args.cluster``
    (every GPU of it a data-parallel worker)."""
    from commsim.clusters import cluster
    from commsim.tuner import as_model

    c = cluster(args.cluster)
    model = as_model(c).model  # the model tune() predicts with
    buckets = gradient_buckets(params, args.bucket_bytes)
    table = commsim.tune("allreduce", c, nranks=c.ngpus, sizes=np.array(buckets, dtype=float))
    print(f"\npredicted on {c.describe()}, {c.ngpus} data-parallel workers, per step:")
    total = 0.0
    for b in buckets:
        schedule = table.schedule(b)
        t = float(model.predict(schedule, b).time)
        total += t
        print(
            f"  bucket {units.format_size(b, exact=False):>9}: {schedule.algorithm:<20} {units.format_time(t)}"
        )
    print(f"  gradient allreduce per step: {units.format_time(total)}")


# -- the command line ----------------------------------------------------------------------------
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=("jax", "mpi", "single"), default="jax")
    ap.add_argument("--devices", type=int, default=8, help="JAX devices (workers) [8]")
    ap.add_argument("--algorithm", default="ring", help="allreduce schedule, or 'auto' [ring]")
    ap.add_argument("--profile", help="with 'auto': tune with this calibrated profile")
    ap.add_argument("--bucket-bytes", type=units.parse_size, default=None,
                    help="gradient buckets of at most this size (tensor fusion) [one bucket]")  # fmt: skip
    ap.add_argument("--compression", choices=("fp16", "bf16", "int8"), default=None,
                    help="send the gradient messages in this wire format, and compare with fp32")  # fmt: skip
    ap.add_argument("--plot", metavar="PNG", default=None,
                    help="with --compression: draw both loss curves into this PNG")  # fmt: skip
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256, help="global batch [256]")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--classes", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", default="dgx-h100:128",
                    help="predict the gradient allreduce on this cluster at the end [dgx-h100:128]")  # fmt: skip
    ap.add_argument("--check", action="store_true",
                    help="also train with the native collective and single-process; compare losses")  # fmt: skip
    args = ap.parse_args(argv)
    args.tune_sizes = "1KiB..1GiB"
    if args.compression and args.backend == "single":
        ap.error("--compression needs the jax or mpi backend (a single process sends nothing)")
    return args


# -- compression against fp32 ---------------------------------------------------------------------
def compare_compression(args: argparse.Namespace, make: Callable[..., Run]) -> dict[str, Any]:
    """Train with ``args.compression`` and with exact float32 messages (same seed): both loss
    curves and the relative difference of the final losses."""
    compressed = losses(train(args, make(args, native=False), quiet=True))
    exact_args = argparse.Namespace(**{**vars(args), "compression": None})
    exact = losses(train(exact_args, make(exact_args, native=False), quiet=True))
    return {
        "compressed": compressed,
        "fp32": exact,
        "final_gap": float(abs(compressed[-1] - exact[-1]) / exact[-1]),
    }


def plot_compression(result: dict[str, Any], name: str, path: str) -> None:
    """The two loss curves of :func:`compare_compression` in one PNG."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 5.6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    top.plot(result["fp32"], label="fp32 messages", color="black", lw=1.5)
    top.plot(result["compressed"], label=f"{name} messages", color="tab:orange", lw=1.2, ls="--")
    top.set_ylabel("training loss (global batch)")
    top.set_yscale("log")
    top.set_title(f"gradient allreduce over {name}: final loss {result['final_gap']:.2%} from fp32")
    top.legend()
    gap = (result["compressed"] - result["fp32"]) / result["fp32"]
    bottom.plot(100 * gap, color="tab:orange", lw=1.0)
    bottom.axhline(0.0, color="black", lw=0.8)
    bottom.set_ylabel(f"{name} - fp32 (% of fp32)")
    bottom.set_xlabel("SGD step")
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    make = {"jax": jax_run, "mpi": mpi_run}
    if args.backend == "single":
        run = single_run(args)
    else:
        run = make[args.backend](args, native=False)
    if run.rank == 0:
        what = (
            "single process"
            if args.backend == "single"
            else f"{run.workers} {args.backend} workers"
        )
        wire = f" over {args.compression}" if args.compression else ""
        print(
            f"data-parallel SGD: {what}, allreduce {args.algorithm}{wire}, global batch {args.batch}"
        )
    history = train(args, run)
    if args.compression:
        result = compare_compression(args, make[args.backend])
        if run.rank == 0:
            print(
                f"final loss: {args.compression} {result['compressed'][-1]:.4f}, fp32 "
                f"{result['fp32'][-1]:.4f} ({result['final_gap']:.2%} apart)"
            )
            if args.plot:
                plot_compression(result, args.compression, args.plot)
                print(f"wrote {args.plot}")
    if args.check and args.backend != "single":
        native = train(args, make[args.backend](args, native=True), quiet=True)
        single = train(args, single_run(args), quiet=True)
        ours = losses(history)
        d_native = float(np.max(np.abs(ours - losses(native))))
        d_single = float(np.max(np.abs(ours - losses(single))))
        if run.rank == 0:
            print(f"max |loss - native collective's| over {len(ours)} steps: {d_native:.2e}")
            print(f"max |loss - single-process full batch's|:           {d_single:.2e}")
    if run.rank == 0 and args.cluster:
        predict_on_cluster(args, init_mlp(layers(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
