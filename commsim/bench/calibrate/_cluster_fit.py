r"""Fit a cluster's link parameters to an nccl-tests log, and write the fitted cluster file.

The model is commsim's topology model (:class:`commsim.models.Topology`, ``bottleneck``
contention) on the cluster's graph, running the schedule the caller chose (the CLI's default is
the NCCL-like one: a ring through the servers for allreduce). Its parameters are the cluster
file's own: for each link table (``[intra]``, the links inside a server; ``[inter]``, each GPU's
link into the fabric and, through the generator, the fabric built from it) a **latency** ``ℓ``
(seconds per link: a message inside a DGX crosses two NVLink links, GPU → NVSwitch → GPU, so it
costs :math:`2ℓ_\text{intra}`) and a **bandwidth efficiency** ``e`` (the table's bandwidth times
``e``; NCCL's protocols reach about 80% of the NVLink line rate, nccl-tests issue #212). The
fitted values are written back into the same tables, so ``--cluster fitted.toml`` *is* the model
that was fitted.

The fit (:func:`fit_cluster`):

* rows up to ``fit_up_to`` bytes (default 16 MiB) are the fit's; larger rows are held out;
* the loss is robust least squares on the relative error :math:`\hat t_i / t_i - 1`
  (``soft_l1`` with ``f_scale=0.05``, as ``scipy.optimize.least_squares`` defines it: residuals
  beyond 5% count linearly, so one bad row does not move the fit), minimized by Gauss-Newton in
  :math:`z = (ℓ, 1/e)`, in which a ring's time on one link class is linear (each step solves the
  linearized robust problem within the bounds, then halves until the loss falls);
* **two regimes**: NCCL switches protocol with the size (LL below some tens of KiB, LL128, then
  Simple; each with its own latency and efficiency), so one latency and one efficiency cannot
  follow the whole curve. Every breakpoint between the fit rows (at least 3 rows on each side)
  is scored on the model linearized at the one-regime fit; the best three are fitted for real,
  and a breakpoint is kept if it lowers Schwarz's criterion (BIC on the robust loss: the second
  regime's parameters must pay for themselves, so noise alone does not split the rows). The
  **large-size regime** is what the cluster file gets (it is what extrapolates to the held-out
  sizes); the small-size regime is reported beside it and written in the file's header comment;
* what the log cannot identify is left as the cluster has it, and the report says so:
  ``[inter]`` on a one-server log; an efficiency that does not move any predicted time at the
  configured values (the NVLink bandwidth of a multi-server ring, whose NICs are every step's
  bottleneck); a parameter the solution does not depend on (its Jacobian column is numerically
  zero), which goes back to its configured value.

R² is computed on log time over the fit rows (times span six decades; on linear time the
largest row alone would decide it).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from commsim import units
from commsim._cluster_model import cluster_model
from commsim._ir import Schedule
from commsim.clusters import Cluster, Edited, build_cluster, description, to_toml
from commsim.errors import CommsimError, ParameterError
from commsim.interop import NcclTestsLog
from commsim.models import Model, ProtocolChoice

__all__ = [
    "DEFAULT_FIT_UP_TO",
    "HELD_OUT_FROM",
    "ClusterFit",
    "LinkFit",
    "check_ranks",
    "cluster_description",
    "fit_cluster",
    "log_model",
    "predict_rows",
]

DEFAULT_FIT_UP_TO = 16 * 2**20  # bytes: the rows a fit uses
HELD_OUT_FROM = 64 * 2**20  # bytes: the rows a validation reports as held out
_TABLES = ("intra", "inter")
_MIN_SIDE = 3  # rows on each side of a regime breakpoint
_UNDETERMINED = 1e-3  # a parameter moving predictions by less than this (relative) is unknown


@dataclasses.dataclass(frozen=True)
class LinkFit:
    """The fitted parameters of one link table (``"intra"`` or ``"inter"``).

    ``latency`` seconds per link and ``efficiency`` (× the table's bandwidth) of the large-size
    regime; ``small_latency``/``small_efficiency`` those of the small-size regime (equal to the
    large ones when the fit found no breakpoint). ``determined`` is ``False`` for a parameter the
    log cannot identify (left at the cluster's value: latency as configured, efficiency 1).
    """

    table: str
    kind: str
    bandwidth: float  # the cluster's, bytes/s
    latency: float
    efficiency: float
    small_latency: float
    small_efficiency: float
    latency_determined: bool
    efficiency_determined: bool

    @property
    def fitted_bandwidth(self) -> float:
        return self.bandwidth * self.efficiency


@dataclasses.dataclass(frozen=True, eq=False)
class ClusterFit:
    """The result of :func:`fit_cluster`: fitted tables, predictions for every row, fit quality."""

    cluster: str
    algorithm: str
    collective: str
    nranks: int
    fit_up_to: int
    links: tuple[LinkFit, ...]
    sizes: np.ndarray  # every row's bytes
    measured: np.ndarray  # seconds, out-of-place
    predicted: np.ndarray  # seconds, the fitted model (each row with its regime's parameters)
    in_fit: np.ndarray  # bool per row
    breakpoint: int | None  # bytes: the large-size regime starts here (None: one regime)
    r2: float  # on log time, fit rows
    description: dict[str, Any]  # the fitted cluster description (a TOML file's tables)
    source: str
    notes: tuple[str, ...] = ()

    @property
    def error(self) -> np.ndarray:
        """Relative error per row, predicted / measured - 1."""
        return self.predicted / self.measured - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "source": self.source,
            "collective": self.collective,
            "algorithm": self.algorithm,
            "nranks": self.nranks,
            "fit_up_to": self.fit_up_to,
            "breakpoint": self.breakpoint,
            "r2_log_time": self.r2,
            "links": [dataclasses.asdict(x) for x in self.links],
            "rows": [
                {"size": int(s), "measured_s": m, "predicted_s": p, "error": e, "in_fit": bool(f)}
                for s, m, p, e, f in zip(
                    self.sizes, self.measured, self.predicted, self.error, self.in_fit, strict=True
                )
            ],
            "notes": list(self.notes),
        }

    def to_toml(self) -> str:
        """The fitted cluster file, with a comment header saying where its numbers came from."""
        head = [
            f"# Fitted by `commsim calibrate --from-nccl-tests {self.source}` to {self.collective} "
            f"({self.algorithm} on {self.nranks} ranks) on rows up to {units.format_size(self.fit_up_to)}.",
            f"# Started from {self.cluster}; R^2 (log time, fit rows) = {self.r2:.4f}.",
        ]
        for x in self.links:
            state = (
                f"latency {units.format_time(x.latency)}/link"
                f"{'' if x.latency_determined else ' (not determined: as configured)'}, "
                f"efficiency {x.efficiency:.3f}"
                f"{'' if x.efficiency_determined else ' (not determined: left at 1)'}"
            )
            head.append(f"# [{x.table}] {x.kind}: {state}")
        if self.breakpoint is not None:
            head.append(
                f"# Below {units.format_size(self.breakpoint)} the log follows another regime "
                "(a protocol switch), not written here:"
            )
            for x in self.links:
                if x.latency_determined or x.efficiency_determined:
                    head.append(
                        f"#   [{x.table}] latency {units.format_time(x.small_latency)}/link, "
                        f"efficiency {x.small_efficiency:.3f}"
                    )
        return "\n".join(head) + "\n" + to_toml(self.description)


# -- the cluster as a description ---------------------------------------------------------------
#: A preset's or a file's description (:func:`commsim.clusters.description`), under the name
#: this package has always exported it by.
cluster_description = description


def check_ranks(log: NcclTestsLog, c: Cluster, spec: str) -> None:
    """Refuse a log whose ranks do not fill ``c`` the way the cluster's servers are laid out."""
    if log.nranks != c.ngpus:
        how = f" ({len(log.hosts)} '# Rank' lines)" if log.hosts else ""
        raise CommsimError(
            f"{log.source} has {log.nranks} ranks{how} but {spec} has {c.ngpus} GPUs "
            f"({c.nodes} x {c.gpus_per_node}): give the cluster the log ran on"
        )
    per_host = set(log.ranks_per_host)
    if log.hosts and per_host != {c.gpus_per_node}:
        raise CommsimError(
            f"{log.source} puts {'/'.join(map(str, log.ranks_per_host))} ranks on its "
            f"{log.nodes} hosts but {spec} has {c.gpus_per_node} GPUs per server"
        )


# -- the fit ------------------------------------------------------------------------------------
class _Model:
    """Predicted times of ``schedule`` on the cluster with parameters ``x`` (per free table:
    latency in µs, then efficiency), for a fixed set of sizes."""

    def __init__(
        self,
        desc: Mapping[str, Any],
        origin: str,
        schedule: Schedule,
        tables: Sequence[str],
        base: Path | None = None,
    ):
        self.desc, self.origin, self.schedule, self.tables = desc, origin, schedule, tuple(tables)
        self.base = base  # where the description's relative file names start
        built = build_cluster(desc, origin, base)
        self.links = {
            t: built.link_classes[(desc[t].get("kind") or ("nvlink" if t == "intra" else "link"))]
            for t in _TABLES
            if isinstance(desc.get(t), Mapping)
        }

    def start(self) -> np.ndarray:
        return np.array(
            [v for t in self.tables for v in (self.links[t].latency * 1e6, 1.0)], dtype=np.float64
        )

    def described(self, x: np.ndarray) -> dict[str, Any]:
        """The description with parameters ``x``; a table that took its numbers from a measured
        ``profile`` gets them written out (the fit's, or the profile's where not fitted). A
        fitted table's bandwidth is the rate the log shows, so it carries no library
        ``efficiency`` (the fit absorbs it, as a measured profile does)."""
        d = copy.deepcopy(dict(self.desc))
        for t, link in self.links.items():
            lat, eff = link.latency, 1.0
            if t in self.tables:
                i = self.tables.index(t)
                lat, eff = max(x[2 * i], 0.0) * 1e-6, x[2 * i + 1]
            elif "profile" not in d[t]:
                continue
            table = {k: v for k, v in d[t].items() if k not in ("profile", "efficiency")}
            d[t] = {
                **table,
                "bandwidth": f"{link.bandwidth * eff / 1e9:.9g}GB/s",
                "latency": f"{lat * 1e9:.9g}ns",
            }
        return d

    def times(self, x: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        c = build_cluster(self.described(x), self.origin, self.base)
        m = cluster_model(c)
        return np.asarray(m.predict(self.schedule, sizes).time, dtype=np.float64).reshape(-1)


@dataclasses.dataclass(frozen=True)
class _Solution:
    x: np.ndarray  # every parameter (the fixed ones at their start values)
    cost: float  # the robust loss at x
    sensitive: np.ndarray  # per parameter: does it move the residuals (fixed ones: False)


_F_SCALE = 0.05  # soft_l1: relative residuals beyond 5% count linearly


def _robust_cost(r: np.ndarray) -> float:
    r"""``scipy.optimize.least_squares``' cost with ``loss="soft_l1"``: half the sum of
    :math:`2f^2(\sqrt{1 + (r/f)^2} - 1)`."""
    return float(np.sum(_F_SCALE**2 * (np.sqrt(1 + (r / _F_SCALE) ** 2) - 1)))


def _jacobian(model: _Model, x: np.ndarray, sizes: np.ndarray, base: np.ndarray, free: np.ndarray):
    """Columns ``d t / d z_j`` (per free parameter) in ``z = (latency µs, 1/efficiency)``."""
    columns = []
    for j in np.flatnonzero(free):
        step = x.copy()
        if j % 2 == 0:
            h = max(1e-3, 1e-3 * x[j])
            step[j] += h
        else:
            h = 1e-3 / x[j]
            step[j] = 1 / (1 / x[j] + h)
        columns.append((model.times(step, sizes) - base) / h)
    return np.stack(columns, axis=1)


def _fit(
    model: _Model, sizes: np.ndarray, measured: np.ndarray, x0: np.ndarray, free: np.ndarray
) -> _Solution:
    """Robust least squares on the relative error over the ``free`` parameters.

    Gauss-Newton in ``z = (latency, 1/efficiency)``, where a ring's time on one link class is
    linear (so a step is nearly exact): each iteration linearizes the model (``1 + k`` model
    evaluations), solves the robust linear problem within the bounds
    (``scipy.optimize.least_squares``, ``soft_l1``), and halves the step until the true loss
    falls.
    """
    from scipy.optimize import least_squares

    m = len(model.tables)
    lo = np.tile([0.0, 1 / 1.5], m)  # latency >= 0 µs; efficiency <= 1.5
    hi = np.tile([1e4, 100.0], m)  # efficiency >= 0.01
    z = np.where(np.arange(2 * m) % 2 == 0, x0, 1 / np.asarray(x0, dtype=np.float64))
    z = np.clip(z, lo, hi)

    def x_of(z: np.ndarray) -> np.ndarray:
        return np.where(np.arange(2 * m) % 2 == 0, z, 1 / z)

    x = x_of(z)
    base = model.times(x, sizes)
    cost = _robust_cost(base / measured - 1)
    jac = np.zeros((len(sizes), 0))
    for _ in range(40):
        jac = _jacobian(model, x, sizes, base, free) / measured[:, None]
        r0 = base / measured - 1
        zf = z[free]
        res = least_squares(
            lambda d, r0=r0, jac=jac: r0 + jac @ d, np.zeros(len(zf)),
            jac=lambda d, jac=jac: jac, bounds=(lo[free] - zf - 1e-12, hi[free] - zf + 1e-12),
            loss="soft_l1", f_scale=_F_SCALE,
        )  # fmt: skip

        improved = False
        for frac in (1.0, 0.5, 0.25, 0.125):
            trial = z.copy()
            trial[free] = np.clip(zf + frac * res.x, lo[free], hi[free])
            t_base = model.times(x_of(trial), sizes)
            t_cost = _robust_cost(t_base / measured - 1)
            if t_cost < cost:
                moved = np.abs(trial - z).max() / max(np.abs(z).max(), 1e-12)
                z, x, base, cost, improved = trial, x_of(trial), t_base, t_cost, True
                break
        if not improved or moved < 1e-7:
            break
    sensitive = np.zeros(len(x0), dtype=bool)
    scale = np.maximum(np.abs(z[free]), 0.1)
    sensitive[free] = np.abs(jac).max(axis=0) * scale > _UNDETERMINED
    return _Solution(x, cost, sensitive)


def fit_cluster(
    log: NcclTestsLog,
    cluster_spec: str | Path | Edited,
    schedule: Schedule,
    *,
    fit_up_to: int = DEFAULT_FIT_UP_TO,
    regimes: bool = True,
) -> ClusterFit:
    """Fit the cluster's link latencies and bandwidth efficiencies to ``log`` (module docstring).

    Args:
        log: the parsed nccl-tests log.
        cluster_spec: a preset (``"dgx-h100:1"``) or a TOML file: the starting point.
        schedule: what the model runs (the collective of the log, on ``log.nranks`` ranks).
        fit_up_to: rows up to this many bytes are fitted; larger ones are only predicted.
        regimes: look for a protocol breakpoint (``False``: one regime for every fit row).
    """
    desc, origin, base = cluster_description(cluster_spec)
    c = build_cluster(desc, origin, base)
    check_ranks(log, c, str(cluster_spec))
    if schedule.nranks != log.nranks:
        raise ParameterError(f"the schedule has {schedule.nranks} ranks, the log {log.nranks}")
    if schedule.spec.name != log.collective:
        raise ParameterError(
            f"the schedule is {schedule.spec.name} but {log.source} is {log.collective}"
        )
    tables, used, notes = _fitted_tables(desc, c, log, cluster_spec)
    model = _Model(desc, origin, schedule, used, base)
    sizes, measured = log.sizes, log.times
    fit_idx = _fit_rows(log, len(used), fit_up_to)
    x0 = model.start()
    rows = (sizes[fit_idx], measured[fit_idx])
    free = _free_parameters(model, x0, rows)
    breakpoint, large, small = _best_regimes(model, rows, x0, free, regimes)
    x_large, x_small, determined = _settle_undetermined(model, rows, x0, large, small, breakpoint)
    for j in np.flatnonzero(~determined):
        what = "latency" if j % 2 == 0 else "bandwidth efficiency"
        notes.append(
            f"[{used[j // 2]}] {what}: this log does not determine it (it does not change the "
            "predicted times): left as configured"
        )
    predicted = model.times(x_large, sizes)
    if breakpoint is not None:
        below = sizes < breakpoint
        if below.any():
            predicted[below] = model.times(x_small, sizes[below])
    fit_rows = np.zeros(len(sizes), dtype=bool)
    fit_rows[fit_idx] = True
    lm, lp = np.log(measured[fit_rows]), np.log(predicted[fit_rows])
    r2 = float(1 - np.sum((lm - lp) ** 2) / max(np.sum((lm - lm.mean()) ** 2), 1e-300))
    links = _link_fits(model, tables, used, x_large, x_small, determined)
    fitted = model.described(x_large)
    fitted["name"] = f"{desc.get('name', origin)}-fitted"
    fitted["sources"] = f"fitted to {Path(log.source).name} (commsim calibrate --from-nccl-tests)"
    fitted["fitted_up_to"] = units.format_size(int(fit_up_to))
    return ClusterFit(
        str(cluster_spec), schedule.algorithm, log.collective, log.nranks, int(fit_up_to),
        tuple(links), sizes, measured, predicted, fit_rows, breakpoint, r2, fitted,
        log.source, tuple(notes),
    )  # fmt: skip


def _fitted_tables(
    desc: Mapping[str, Any], c: Any, log: NcclTestsLog, cluster_spec: str | Path | Edited
) -> tuple[list[str], list[str], list[str]]:
    """The description's link tables, those this log's traffic crosses (fitted), and a note
    for each one it does not."""
    tables = [t for t in _TABLES if isinstance(desc.get(t), Mapping)]
    notes: list[str] = []
    used = []
    for t in tables:
        if t == "intra" and c.gpus_per_node == 1:
            notes.append("[intra]: one GPU per server, no intra-server links: left as configured")
        elif t == "inter" and c.nodes == 1 and "intra" in tables:
            notes.append(
                "[inter]: a one-server log never crosses the fabric: left as configured "
                "(latency as given, efficiency 1.0)"
            )
        else:
            used.append(t)
    if not used:
        raise CommsimError(f"{log.source}: no link of {cluster_spec} carries this log's traffic")
    return tables, used, notes


def _fit_rows(log: NcclTestsLog, nused: int, fit_up_to: int) -> np.ndarray:
    """The indices of the rows fitted (up to ``fit_up_to`` bytes, by size, none of 0 bytes);
    an error when fewer than the ``2 · nused`` parameters need."""
    sizes = log.sizes
    order = np.argsort(sizes, kind="stable")
    in_fit = sizes <= fit_up_to
    fit_idx = order[in_fit[order]]
    need = 2 * nused + 1
    if len(fit_idx) < need:
        raise CommsimError(
            f"{log.source}: {len(fit_idx)} rows up to {units.format_size(fit_up_to)}, a fit of "
            f"{2 * nused} parameters needs at least {need}"
        )
    if (sizes[fit_idx] == 0).any():
        fit_idx = fit_idx[sizes[fit_idx] > 0]
    return fit_idx


def _free_parameters(
    model: _Model, x0: np.ndarray, rows: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Which parameters are fitted: an efficiency when it moves the predicted times at the
    configured values (the NVLink bandwidth of a multi-server ring never does: the NICs are
    every step's bottleneck); a latency always (which latency a step waits for depends on the
    fit)."""
    base = model.times(x0, rows[0])
    jac = _jacobian(model, x0, rows[0], base, np.ones(len(x0), dtype=bool)) / rows[1][:, None]
    start_z = np.where(np.arange(len(x0)) % 2 == 0, x0, 1 / x0)
    moves = np.abs(jac).max(axis=0) * np.maximum(np.abs(start_z), 0.1) > _UNDETERMINED
    return moves | (np.arange(len(x0)) % 2 == 0)


def _best_regimes(
    model: _Model,
    rows: tuple[np.ndarray, np.ndarray],
    x0: np.ndarray,
    free: np.ndarray,
    regimes: bool,
) -> tuple[float | None, Any, Any]:
    """``(breakpoint, fit above it, fit below it)``: one regime for every row (breakpoint
    ``None``, both fits the same), or the protocol breakpoint with the best BIC."""
    whole = _fit(model, *rows, x0, free)
    n, k = len(rows[0]), int(free.sum())
    best = (_bic(whole.cost, n, k), None, whole, whole)
    if regimes:
        for b in _breakpoints(model, rows, whole, free):
            hi, lo = rows[0] >= b, rows[0] < b
            large = _fit(model, rows[0][hi], rows[1][hi], whole.x, free)
            small = _fit(model, rows[0][lo], rows[1][lo], whole.x, free)
            score = _bic(large.cost + small.cost, n, 2 * k + 1)
            if score < best[0]:
                best = (score, b, large, small)
    _, breakpoint, large, small = best
    return breakpoint, large, small


def _settle_undetermined(
    model: _Model,
    rows: tuple[np.ndarray, np.ndarray],
    x0: np.ndarray,
    large: Any,
    small: Any,
    breakpoint: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x_large, x_small, determined)``: a parameter the solution does not depend on goes
    back to its configured value, where that changes no prediction (else it stays, as
    determined after all)."""
    x_large, x_small = large.x.copy(), small.x.copy()
    determined = large.sensitive.copy()
    at = model.times(x_large, rows[0])
    for j in np.flatnonzero(~determined):
        trial = x_large.copy()
        trial[j] = x0[j]
        if np.abs(model.times(trial, rows[0]) / at - 1).max() < _UNDETERMINED:
            x_large = trial
            if breakpoint is None:
                x_small = trial
        else:
            determined[j] = True
    return x_large, x_small, determined


def _link_fits(
    model: _Model,
    tables: list[str],
    used: list[str],
    x_large: np.ndarray,
    x_small: np.ndarray,
    determined: np.ndarray,
) -> list[LinkFit]:
    """One :class:`LinkFit` per link table: fitted, or as configured when the log does not
    cross it."""
    links = []
    index = {t: i for i, t in enumerate(used)}
    for t in tables:
        cls = model.links[t]
        if t in index:
            i = index[t]
            lat_ok, eff_ok = bool(determined[2 * i]), bool(determined[2 * i + 1])
            links.append(
                LinkFit(
                    t, cls.name, cls.bandwidth, float(x_large[2 * i] * 1e-6),
                    float(x_large[2 * i + 1]), float(x_small[2 * i] * 1e-6),
                    float(x_small[2 * i + 1]), lat_ok, eff_ok,
                )
            )  # fmt: skip
        else:
            links.append(
                LinkFit(
                    t, cls.name, cls.bandwidth, cls.latency, 1.0, cls.latency, 1.0, False, False
                )
            )
    return links


def _breakpoints(
    model: _Model,
    rows: tuple[np.ndarray, np.ndarray],
    whole: _Solution,
    free: np.ndarray,
    keep: int = 3,
) -> list[int]:
    """The ``keep`` most promising sizes where a second regime may start (the caller fits each
    for real): ranked on the model linearized at the one-regime fit in ``z = (latency,
    1/efficiency)``, where a one-class ring's time is linear, so a candidate costs a small
    linear fit instead of two model fits."""
    from scipy.optimize import least_squares

    sizes, measured = rows
    base = model.times(whole.x, sizes)
    jac = _jacobian(model, whole.x, sizes, base, free) / measured[:, None]
    r0 = base / measured - 1
    n, k = len(sizes), int(free.sum())

    def cost(mask: np.ndarray) -> float:
        res = least_squares(
            lambda d: r0[mask] + jac[mask] @ d, np.zeros(k), loss="soft_l1", f_scale=_F_SCALE
        )
        return float(res.cost)

    ranked = []
    for b in np.unique(sizes)[1:]:
        hi = sizes >= b
        if (~hi).sum() < _MIN_SIDE or hi.sum() < max(_MIN_SIDE, k + 1):
            continue
        ranked.append((_bic(cost(hi) + cost(~hi), n, 2 * k + 1), int(b)))
    return [b for _, b in sorted(ranked)[:keep]]


def _bic(cost: float, n: int, k: int) -> float:
    """Schwarz's criterion on the robust loss: a breakpoint (``k`` grows from ``2m`` to
    ``4m + 1``) must pay for its parameters, so noise alone does not split the rows."""
    return n * np.log(max(2 * cost, 1e-300) / n) + k * np.log(n)


def predict_rows(
    log: NcclTestsLog,
    cluster_spec: str | Path | Edited,
    schedule: Schedule,
    port_rule: str = "channel",
) -> np.ndarray:
    """The topology model's time (seconds) for every row of ``log`` on the cluster as given
    (a preset's defaults, or a fitted file), under ``port_rule``: what ``commsim validate
    --from-nccl-tests`` shows."""
    model = log_model(log, cluster_spec, port_rule=port_rule)
    return np.asarray(model.predict(schedule, log.sizes).time, dtype=np.float64).reshape(-1)


def log_model(
    log: NcclTestsLog,
    cluster_spec: str | Path | Edited,
    protocol: str | None = None,
    port_rule: str = "channel",
) -> Model:
    """The topology model of the cluster ``log`` ran on (a preset or a fitted file), its ranks
    checked against the log's; messages carried by ``protocol`` (``"LL"``, ``"LL128"``,
    ``"Simple"``; ``"auto"``: the fastest per size, :class:`~commsim.models.ProtocolChoice`;
    ``None``: the links as they are), ranks driving their host's links by ``port_rule``
    (:class:`~commsim.models.Topology`)."""
    desc, origin, base = cluster_description(cluster_spec)
    c = build_cluster(desc, origin, base)
    check_ranks(log, c, str(cluster_spec))
    if protocol == "auto":
        return ProtocolChoice(lambda p: cluster_model(c, protocol=p, port_rule=port_rule))
    return cluster_model(c, protocol=protocol, port_rule=port_rule)
