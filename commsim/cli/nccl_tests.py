"""``--from-nccl-tests LOG``: calibrate a cluster from an nccl-tests log, or validate against one.

``commsim calibrate --from-nccl-tests LOG --cluster PRESET|FILE [-o fitted.toml]`` fits the
cluster's link latency and bandwidth efficiency per link table to the log's rows up to
``--fit-up-to`` (:func:`commsim.bench.calibrate.fit_cluster`) and writes the fitted cluster file;
``commsim validate --from-nccl-tests LOG --cluster PRESET|FILE`` prints predicted against
measured for every row, the median absolute error, and the held-out rows (64 MiB and up)
apart. ``docs/nccl-tests.md`` explains what is fitted and what a fit cannot know.

The model runs the algorithm NCCL runs for the log's collective
(:data:`commsim.algorithms.NCCL_ALGORITHMS`, which says why; ``--algorithm`` overrides);
``validate -a auto`` lets the model pick algorithm × protocol × channels per row, as NCCL's tuner
does (:mod:`commsim.cli.nccl_pick`), and ``--protocol``/``--channels`` carry the schedule as NCCL
would; each row then says what ran.

Like every command: :func:`parse` the options into an :class:`NcclTestsRequest` (the log read,
the schedule built), :func:`compute` the fit or the predictions (writing ``-o`` and ``--plot``),
:func:`render` the text or JSON; :func:`calibrate_main` and :func:`validate_main` run the three.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

import commsim
from commsim import units
from commsim._deprecation import deprecated_aliases
from commsim.algorithms import NCCL_ALGORITHMS, info
from commsim.cli.errors import EXIT_OK, UsageError
from commsim.cli.model import parse_channels, parse_protocol
from commsim.cli.nccl_pick import Pick, auto_channels, fixed_rows, pick_rows
from commsim.cli.output import format_table, say_plot, to_json
from commsim.models import PORT_RULES

if TYPE_CHECKING:  # imported where used: `commsim --help` needs neither
    from commsim.bench.calibrate import ClusterFit, LibraryFit
    from commsim.clusters import Cluster, Edited
    from commsim.interop import NcclTestsLog

__all__ = [
    "NcclTestsRequest",
    "NcclTestsResult",
    "add_arguments",
    "calibrate_main",
    "compute",
    "parse",
    "render",
    "validate_main",
]

__getattr__ = deprecated_aliases(
    __name__, {"DEFAULT_ALGORITHMS": ("commsim.algorithms.NCCL_ALGORITHMS", NCCL_ALGORITHMS)}
)


@dataclasses.dataclass(frozen=True, eq=False)
class NcclTestsRequest:
    """Fit ``cluster`` to ``log`` (``mode="calibrate"``) or check its predictions against it
    (``"validate"``), the model running ``schedule``; rows up to ``fit_up_to`` bytes are the
    fit's. ``output`` (calibrate's ``-o``, as given) and ``plot`` are files to write. Validate's
    ``auto`` (``-a auto``: the model picks per row, ``schedule`` unused), ``protocol`` and
    ``channels`` (``--protocol``, ``--channels``; ``None`` when not given) say how NCCL would
    carry it, ``port_rule`` (``--port-rule``) how a rank drives its host's links;
    ``ranks_per_node`` is the cluster's."""

    mode: Literal["calibrate", "validate"]
    log: NcclTestsLog
    cluster: str | Edited
    schedule: commsim.Schedule
    fit_up_to: int | None
    notes: tuple[str, ...] = ()
    output: str | None = None
    plot: Path | None = None
    as_json: bool = False
    auto: bool = False
    protocol: str | None = None
    channels: int | None = None
    ranks_per_node: int = 1
    port_rule: str = "channel"
    params: tuple[str, ...] = ()  # --param items, as given

    @property
    def carried(self) -> bool:
        """Whether the rows say what ran (``-a auto``, ``--protocol`` or ``--channels``)."""
        return self.auto or self.protocol is not None or self.channels is not None


@dataclasses.dataclass(frozen=True, eq=False)
class NcclTestsResult:
    """The predicted time of every row (s), its error against the log, the summary of those
    errors, and for calibrate the fit and its cluster file."""

    request: NcclTestsRequest
    predicted: np.ndarray
    summary: dict[str, Any]
    fit: ClusterFit | None = None
    toml: str | None = None
    library: LibraryFit | str | None = None  # calibrate: NCCL's cost model fitted, or why not
    picks: tuple[Pick, ...] = ()  # validate: per row, what the model ran (``request.carried``)
    notes: tuple[str, ...] = ()


def _add_once(parser: argparse.ArgumentParser, *flags: str, **kwargs: Any) -> None:
    """Add an option unless the command already has it (``validate`` has ``-c``/``--cluster``)."""
    existing = getattr(parser, "_option_string_actions", {})
    if not any(f in existing for f in flags):
        parser.add_argument(*flags, **kwargs)


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, carry: bool = False
) -> None:
    """``--from-nccl-tests LOG --fit-up-to SIZE``, and ``--cluster --collective --algorithm``
    where the command does not have them yet (``validate`` has ``-c``/``-a``); with ``carry``
    (``validate``) also ``--protocol`` and ``--channels``. Takes a parser (the options get a
    group of their own) or a group the command made for them."""
    # a parser gets its own group; a group the command made for these options is used as is
    g = parser.add_argument_group("nccl-tests log") if hasattr(parser, "parse_args") else parser
    g.add_argument(
        "--from-nccl-tests",
        dest="from_nccl_tests",
        metavar="LOG",
        help="an nccl-tests output (all_reduce_perf, all_gather_perf, ...): calibrate the "
        "cluster's links to it, or validate the cluster's predictions against it",
    )
    g.add_argument(
        "--fit-up-to",
        dest="fit_up_to",
        metavar="SIZE",
        help="calibrate: fit the rows up to this size; larger rows are only predicted "
        "(default 16MiB). validate: the rows the cluster was fitted to, held apart from the "
        "larger ones (default: what a fitted file says; a preset: none, every row predicted)",
    )
    _add_once(
        g, "--cluster", metavar="PRESET|FILE.toml", help="the cluster the log ran on (dgx-h100:1)"
    )
    _add_once(
        g,
        "--collective",
        metavar="C",
        help="the log's collective, when the log does not name its binary (allgather vs alltoall)",
    )
    _add_once(
        g,
        "--algorithm",
        metavar="NAME",
        help="the algorithm the model runs (default: NCCL-like: "
        + ", ".join(f"{a} for {c}" for c, a in NCCL_ALGORITHMS.items())
        + ")",
    )
    _add_once(
        g,
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="change one field of the --cluster preset or file, as its TOML file names it: "
        "sharp=true, intra.efficiency=1, inter.bandwidth=800Gb/s (repeatable)",
    )
    if carry:
        _add_carry(g)


def _add_carry(g: argparse._ArgumentGroup) -> None:
    """``--protocol`` and ``--channels`` for ``validate --from-nccl-tests`` (and ``-a auto``)."""
    g.add_argument(
        "--protocol",
        metavar="NAME",
        default=None,
        help="with --from-nccl-tests: carry the messages with NCCL's LL, LL128 or Simple, or "
        "auto: the fastest per row (the default of -a auto; without it, the links as they are)",
    )
    g.add_argument(
        "--channels",
        metavar="C",
        default=None,
        help="with --from-nccl-tests: run the schedule on C channels (laid out by its "
        "algorithm: snake_ring and nccl_tree spread them over the servers' NICs); with -a auto, "
        "the most channels tried (1, 2, 4, ..., C; default: the server's GPUs, at most 8)",
    )
    g.add_argument(
        "--port-rule",
        dest="nccl_port_rule",
        metavar="RULE",
        default=None,
        choices=PORT_RULES,
        help="with --from-nccl-tests: channel (default): a rank sends one message per channel "
        "at a time; link: a queue per link of its host, NVLink beside the NIC "
        "(docs/sharp-bits.md, Ports and links)",
    )


# -- parse --------------------------------------------------------------------------------------
def _one(value: Any, flag: str) -> str | None:
    """An option that may arrive as a list (``validate``'s ``-a``): exactly one value."""
    if value is None or isinstance(value, str):
        return value
    values = [v for v in value if v]
    if len(values) > 1:
        raise UsageError(
            f"{flag}: an nccl-tests log is one algorithm's run, got {', '.join(values)}"
        )
    return values[0] if values else None


def parse(args: argparse.Namespace, mode: Literal["calibrate", "validate"]) -> NcclTestsRequest:
    """The request of ``commsim calibrate|validate --from-nccl-tests``: the log read, the
    cluster checked, the schedule built; every problem a one-line error."""
    from commsim.bench.calibrate import DEFAULT_FIT_UP_TO
    from commsim.interop import read_nccl_tests

    path = getattr(args, "from_nccl_tests", None)
    if not path:
        raise UsageError("give the log: --from-nccl-tests LOG")
    spec = getattr(args, "cluster", None)
    if not spec:
        raise UsageError(
            "--from-nccl-tests needs the cluster the log ran on: --cluster PRESET|FILE.toml "
            "(e.g. dgx-h100:1)"
        )
    sets = tuple(getattr(args, "set", None) or ())
    if sets:
        from commsim.clusters import Edited

        spec = Edited(spec, sets)
    collective = _one(getattr(args, "collective", None), "--collective")
    log = read_nccl_tests(path, collective=collective)
    algorithm = _auto(getattr(args, "algorithm", None), mode)
    protocol, nchannels = parse_protocol(args), _channels(args)
    port_rule = getattr(args, "nccl_port_rule", None) or "channel"
    raw_params = list(getattr(args, "param", None) or [])
    if raw_params and algorithm == "auto":
        raise UsageError("--param with -a auto: the tuner picks each row's parameters; drop one")
    schedule, c = _schedule(log, spec, None if algorithm == "auto" else algorithm, path, raw_params)
    notes = list(log.notes)
    if log.collective_from != "the columns":
        notes.append(f"collective {log.collective} from {log.collective_from}")
    if log.time_column == "cputime":
        notes.append("the log's times are CPU times (nccl-tests -C), not GPU times")
    given = getattr(args, "fit_up_to", None)
    fit_up_to = _size(given, "--fit-up-to") if given else None
    if mode == "calibrate":
        fit_up_to = fit_up_to or DEFAULT_FIT_UP_TO
    elif fit_up_to is None:
        fit_up_to = c.fitted_up_to
    if mode == "validate" and c.fitted_up_to is not None:
        notes.append(
            "a fitted file holds its fit's large-size regime: rows below calibrate's breakpoint "
            "ran another protocol (the file's header comment gives that regime), so fit rows "
            "below it predict far off here"
        )
    plot = getattr(args, "plot", None)
    return NcclTestsRequest(
        mode,
        log,
        spec,
        schedule,
        fit_up_to,
        tuple(notes),
        getattr(args, "output", None) if mode == "calibrate" else None,
        Path(plot) if plot else None,
        bool(getattr(args, "json", False)),
        algorithm == "auto",
        "auto" if algorithm == "auto" and protocol is None else protocol,
        nchannels,
        c.gpus_per_node,
        port_rule,
        tuple(raw_params),
    )


def _auto(value: Any, mode: str) -> str | None:
    """``-a``/``--algorithm``: one name, or ``auto`` (validate only), never ``auto`` with others."""
    names = [v for v in (value if isinstance(value, list) else [value]) if v]
    words = [w.strip() for v in names for w in str(v).split(",") if w.strip()]
    if "auto" in words:
        if len(words) > 1:
            others = ", ".join(w for w in words if w != "auto")
            raise UsageError(f"-a auto picks the algorithm per row; drop {others}")
        if mode != "validate":
            raise UsageError(
                "--algorithm auto: calibrate fits the links to one algorithm's run; name it"
            )
        return "auto"
    return _one(value, "--algorithm")


def _channels(args: argparse.Namespace) -> int | None:
    """``--channels`` (``None`` when not given); 0, a word or more than
    :data:`~commsim.algorithms.MAX_PARTS` is one line, exit 2."""
    from commsim.algorithms import MAX_PARTS

    if getattr(args, "channels", None) is None:
        return None
    k = parse_channels(args)
    if k > MAX_PARTS:
        raise UsageError(f"--channels: at most {MAX_PARTS} (a buffer's parts), got {k}")
    return k


def _schedule(
    log: NcclTestsLog,
    cluster: str | Edited,
    algorithm: str | None,
    path: str,
    raw: list[str] = (),
) -> tuple[commsim.Schedule, Cluster]:
    """The schedule the model runs for ``log`` on ``cluster``: ``algorithm``, else the one NCCL
    runs, with the ``--param`` items ``raw``; ``ranks_per_node`` from the cluster where it
    takes one, the log's root where rooted; on the log's ranks as GPUs (an in-network row adds
    its switch helpers, :meth:`~commsim.algorithms.AlgorithmInfo.nranks_for`); and the
    cluster."""
    from commsim.bench.calibrate import cluster_description
    from commsim.cli.schedules import parse_params
    from commsim.clusters import build_cluster

    desc, origin, base = cluster_description(cluster)
    c = build_cluster(desc, origin, base)
    algorithm = algorithm or NCCL_ALGORITHMS[log.collective]
    row = info(log.collective, algorithm)
    params: dict[str, Any] = dict(parse_params(raw, log.collective, [algorithm])[algorithm])
    if "ranks_per_node" in row.params:
        params.setdefault("ranks_per_node", c.gpus_per_node)
    if commsim.spec(log.collective).rooted:
        roots = {r.root for r in log.rows}
        if len(roots) > 1:
            raise UsageError(
                f"{path}: rows with roots {sorted(roots)}; the model runs one root: keep one"
            )
        params["root"] = max(roots.pop(), 0)
    s = commsim.build(log.collective, algorithm, nranks=row.nranks_for(log.nranks), **params)
    return s, c


def _size(value: Any, flag: str) -> int:
    try:
        return units.parse_size(value)
    except units.UnitError as e:
        raise UsageError(f"{flag}: {e}") from None


# -- compute ------------------------------------------------------------------------------------
def compute(request: NcclTestsRequest) -> NcclTestsResult:
    """Fit the cluster (calibrate; ``-o`` gets the fitted file) or predict every row with it as
    given (validate); ``--plot`` gets measured against predicted."""
    from commsim.bench.calibrate import fit_cluster, predict_rows

    r = request
    if r.mode == "calibrate":
        fit = fit_cluster(r.log, r.cluster, r.schedule, fit_up_to=r.fit_up_to)
        toml = fit.to_toml()
        if r.output:
            try:
                Path(r.output).write_text(toml)
            except OSError as e:
                raise UsageError(f"-o {r.output}: cannot write ({e.strerror or e})") from None
        if r.plot:
            _plot(r.plot, r.log, fit.predicted, r.fit_up_to, fit.breakpoint, f"fitted {r.cluster}")
        summary = _summary(fit.sizes, fit.error, r.fit_up_to)
        return NcclTestsResult(request, fit.predicted, summary, fit, toml, _library(r))
    picks: tuple[Pick, ...] = ()
    notes: tuple[str, ...] = ()
    if r.carried:
        predicted, picks, notes = _carried(r)
    else:
        predicted = predict_rows(r.log, r.cluster, r.schedule, r.port_rule)
    summary = _summary(r.log.sizes, predicted / r.log.times - 1, r.fit_up_to)
    if r.plot:
        _plot(r.plot, r.log, predicted, r.fit_up_to, None, r.cluster)
    return NcclTestsResult(request, predicted, summary, picks=picks, notes=notes)


def _carried(r: NcclTestsRequest) -> tuple[np.ndarray, tuple[Pick, ...], tuple[str, ...]]:
    """Validate with ``-a auto``, ``--protocol`` or ``--channels``: each row's time and pick."""
    from commsim.bench.calibrate import log_model

    model = log_model(r.log, r.cluster, r.protocol, r.port_rule)
    sizes = np.asarray(r.log.sizes, dtype=np.float64)
    if not r.auto:
        return (*fixed_rows(model, r.schedule, sizes, r.channels or 1, r.protocol), ())
    most = r.channels if r.channels is not None else auto_channels(r.ranks_per_node)
    rows, left_out = _auto_rows(r)
    times, picks, notes = pick_rows(
        model, r.log.collective, r.log.nranks, sizes, r.ranks_per_node, most, r.protocol, rows
    )
    notes = (*notes, left_out) if left_out else notes
    if commsim.spec(r.log.collective).rooted and r.schedule.root:
        notes = (*notes, f"-a auto: the tuner builds root 0, the log's root is {r.schedule.root}")
    return times, picks, notes


def _auto_rows(r: NcclTestsRequest) -> tuple[tuple[str, ...], str | None]:
    """The rows ``-a auto`` chooses among: NCCL's for the log's collective, with NVLS or
    NVLSTree where the cluster's NVSwitches reduce and CollNetDirect where its fabric does
    (``sharp``; :func:`commsim.algorithms.nccl_choices`), unless ``--protocol`` fixes one that
    does not carry them (LL, LL128: NCCL runs NVLS and CollNet with Simple only); and the note
    that says so, or ``None``."""
    from commsim.algorithms import NCCL_FABRIC_CHOICES, NCCL_SWITCH_CHOICES, nccl_choices
    from commsim.clusters import cluster
    from commsim.models import PROTOCOLS

    servers = -(-r.log.nranks // max(r.ranks_per_node, 1))
    c = cluster(r.cluster)
    fixed = PROTOCOLS.get(r.protocol) if r.protocol not in (None, "auto") else None
    server = fixed is None or fixed.carries(True)
    fabric = fixed is None or fixed.carries("fabric")
    rows = nccl_choices(r.log.collective, switch_reduces=c.nvls and server, servers=servers,
                        fabric_reduces=c.sharp and fabric)  # fmt: skip
    if (c.nvls and not server) or (c.sharp and not fabric):
        left = set(nccl_choices(r.log.collective, switch_reduces=c.nvls, servers=servers,
                                fabric_reduces=c.sharp))  # fmt: skip
        left -= set(rows)
        if left:
            coll = r.log.collective
            families = (
                ("NVLS", set(NCCL_SWITCH_CHOICES.get(coll, ()))),
                ("CollNet", {NCCL_FABRIC_CHOICES.get(coll)}),
            )
            kinds = " and ".join(name for name, family in families if left & family)
            return rows, (
                f"-a auto left out {', '.join(sorted(left))}: NCCL runs {kinds} with Simple "
                f"only, not --protocol {r.protocol}"
            )
    return rows, None


def _library(r: NcclTestsRequest) -> LibraryFit | str:
    """NCCL's cost model fitted to the same rows, or the one line saying why it is not."""
    from commsim.bench.calibrate import fit_library
    from commsim.errors import CommsimError

    try:
        return fit_library(r.log, r.schedule, fit_up_to=r.fit_up_to)
    except CommsimError as e:
        return str(e)


def _library_lines(lib: LibraryFit | str | None, fit_up_to: int) -> list[str]:
    """The library parameters (NCCL's cost model, one line per protocol) and what they predict."""
    if lib is None:
        return []
    if isinstance(lib, str):
        return ["", f"library parameters: not fitted: {lib}"]
    lines = [
        "",
        f"library parameters (NCCL's cost model, tuning.cc; rows up to "
        f"{units.format_size(fit_up_to)}, noise {100 * lib.noise:.1f}% from out-of-place vs "
        "in-place):",
        f"  bus bandwidth {units.format_bandwidth(lib.bus_bandwidth)} (the last regime's slope), "
        f"launch {units.format_time(lib.launch)}",
    ]
    for p in lib.protocols:
        eff = "-" if p.efficiency is None else f"{p.efficiency:.3f}"
        lines.append(
            f"  {p.name:<24} from {units.format_size(p.start, exact=False):>7} ({p.rows} rows): "
            f"constant {units.format_time(p.constant)}, efficiency {eff}"
        )
    fit_err, held = lib.median_error(held_out=False), lib.median_error()
    lines.append(
        f"  median |error| of this model: fit rows {100 * fit_err:.1f}%"
        + ("" if np.isnan(held) else f", rows from 64MiB {100 * held:.1f}%")
    )
    lines += [
        f"  not identified: {n}" if "identifiable" in n else f"  note: {n}" for n in lib.notes
    ]
    return lines


def _summary(sizes: np.ndarray, err: np.ndarray, fit_up_to: int | None) -> dict[str, Any]:
    """Median and largest |error| over every row; where the cluster was fitted (``fit_up_to``),
    the fit range and the held-out rows (>= 64 MiB and beyond the fit range) apart."""
    from commsim.bench.calibrate import HELD_OUT_FROM

    out: dict[str, Any] = {
        "median_abs_error": float(np.median(np.abs(err))),
        "max_abs_error": float(np.abs(err).max()),
        "fitted_up_to": fit_up_to,
    }
    if fit_up_to is None:
        return out
    for key, mask in (
        ("fit_rows", sizes <= fit_up_to),
        ("held_out", (sizes >= HELD_OUT_FROM) & (sizes > fit_up_to)),
    ):
        if mask.any():
            a = np.abs(err[mask])
            out[key] = {"rows": int(mask.sum()), "median_abs_error": float(np.median(a)),
                        "max_abs_error": float(a.max())}  # fmt: skip
        else:
            out[key] = {"rows": 0, "median_abs_error": None, "max_abs_error": None}
    return out


# -- render -------------------------------------------------------------------------------------
def render(result: NcclTestsResult) -> str:
    """What the command prints: the fit (calibrate) or the rows (validate), text or JSON."""
    if result.fit is not None:
        return _render_fit(result, result.fit)
    r, log = result.request, result.request.log
    algorithm = "auto" if r.auto else r.schedule.algorithm
    notes = [*r.notes, *result.notes]
    if r.as_json:
        rows = [
            {"size": int(s), "measured_s": m, "predicted_s": p, "error": p / m - 1}
            for s, m, p in zip(log.sizes, log.times, result.predicted, strict=True)
        ]
        for row, pick in zip(rows, result.picks, strict=False):
            row["pick"] = pick.to_dict()
        if r.fit_up_to is not None:
            for row, role in zip(rows, _roles(log.sizes, r.fit_up_to, None), strict=True):
                row["row"] = role
        carried = {"protocol": r.protocol, "channels": r.channels} if r.carried else {}
        return to_json({"log": log.to_dict(), "cluster": str(r.cluster), "algorithm": algorithm,
                        **carried, "port_rule": r.port_rule, "rows": rows,
                        "summary": result.summary, "notes": notes}) + "\n"  # fmt: skip
    ports = ", ports=link (a queue per host link)" if r.port_rule == "link" else ""
    lines = [
        log.describe(),
        f"model: topology on {r.cluster}{ports}, {_carried_label(r, algorithm)} "
        f"({log.collective}, {log.nranks} ranks)",
        "",
        _rows_table(log, result.predicted, r.fit_up_to, None, result.picks),
        "",
        *_summary_lines(result.summary, r.fit_up_to),
        *(f"note: {n}" for n in notes),
    ]
    return "\n".join(lines) + "\n"


def _carried_label(r: NcclTestsRequest, algorithm: str) -> str:
    """The model line's algorithm: ``auto (NCCL-like: ...; up to C channels, protocol auto)``
    or the algorithm with its ``--channels``/``--protocol``."""
    if r.auto:
        most = r.channels if r.channels is not None else auto_channels(r.ranks_per_node)
        return (
            f"auto (the fastest of {', '.join(_auto_rows(r)[0])} per row, "
            f"on up to {most} channels, protocol {r.protocol or 'as the links'})"
        )
    extra = list(r.params)
    extra += [f"{r.channels} channels"] if r.channels is not None else []
    extra += [f"protocol {r.protocol}"] if r.protocol is not None else []
    return algorithm + (f" ({', '.join(extra)})" if extra else "")


def _render_fit(result: NcclTestsResult, fit: ClusterFit) -> str:
    r, log = result.request, result.request.log
    if r.as_json:
        lib = result.library
        doc = {"log": log.describe(), **fit.to_dict(), "summary": result.summary,
               "toml": result.toml, "output": r.output, "notes": [*r.notes, *fit.notes],
               "library": lib.to_dict() if lib is not None and not isinstance(lib, str)
               else {"refused": lib}}  # fmt: skip
        return to_json(doc) + "\n"
    lines = [
        log.describe(),
        f"model: topology on {r.cluster}, {fit.algorithm} ({log.collective}, "
        f"{log.nranks} ranks), fit on rows up to {units.format_size(r.fit_up_to)}",
        "",
        _fit_table(fit),
    ]
    if fit.breakpoint is not None:
        lines.append(
            f"regimes: a protocol switch at {units.format_size(fit.breakpoint)}; the file gets "
            "the large-size regime (it extrapolates), the small one is in its header"
        )
    lines += [
        f"R^2 (log time, fit rows): {fit.r2:.4f}",
        "",
        _rows_table(log, fit.predicted, r.fit_up_to, fit.in_fit),
        "",
        *_summary_lines(result.summary, r.fit_up_to),
        *(f"note: {n}" for n in (*r.notes, *fit.notes)),
        *_library_lines(result.library, r.fit_up_to),
    ]
    if r.output:
        lines.append(f"wrote {r.output} (use it: --cluster {r.output})")
        return "\n".join(lines) + "\n"
    lines += ["", "# the fitted cluster file (give -o FILE to write it):"]
    return "\n".join(lines) + "\n" + (result.toml or "")


def _time(s: float) -> str:
    return units.format_time(float(s))


def _pct(e: float) -> str:
    return f"{100 * e:+.1f}%"


def _held_out_label(fit_up_to: int) -> str:
    from commsim.bench.calibrate import HELD_OUT_FROM

    if fit_up_to < HELD_OUT_FROM:
        return f"{units.format_size(HELD_OUT_FROM)} and up"
    return f"above {units.format_size(fit_up_to)}"


def _summary_lines(s: dict[str, Any], fit_up_to: int | None) -> list[str]:
    lines = [
        f"median |error|, every row: {100 * s['median_abs_error']:.1f}% "
        f"(max {100 * s['max_abs_error']:.1f}%)"
    ]
    if fit_up_to is None:
        return lines
    for key, what in (
        ("fit_rows", f"rows up to {units.format_size(fit_up_to)}"),
        ("held_out", f"held-out rows ({_held_out_label(fit_up_to)})"),
    ):
        part = s[key]
        if part["rows"]:
            lines.append(
                f"median |error|, {what}: {100 * part['median_abs_error']:.1f}% "
                f"(max {100 * part['max_abs_error']:.1f}%, {part['rows']} rows)"
            )
        else:
            lines.append(f"{what}: none in this log")
    return lines


def _rows_table(
    log: NcclTestsLog,
    predicted: np.ndarray,
    fit_up_to: int | None,
    in_fit: np.ndarray | None,
    picks: tuple[Pick, ...] = (),
) -> str:
    """Every row, measured against predicted; with a fit (``fit_up_to``), a ``row`` column
    saying which rows were fitted and which held out."""

    sizes, measured = log.sizes, log.times
    err = predicted / measured - 1
    rows = []
    for i, r in enumerate(log.rows):
        busbw = r.busbw_oop
        rows.append([
            units.format_size(int(r.size)), _time(measured[i]), _time(predicted[i]), _pct(err[i]),
            "-" if busbw is None else f"{busbw:.2f}",
        ])  # fmt: skip
    headers, align = ["size", "measured", "predicted", "error", "busbw GB/s"], "rrrrr"
    if fit_up_to is not None:
        for row, role in zip(rows, _roles(sizes, fit_up_to, in_fit), strict=True):
            row.append(role)
        headers, align = [*headers, "row"], align + "l"
    if picks:
        for row, pick in zip(rows, picks, strict=True):
            row.append(pick.label())
        headers, align = [*headers, "model ran"], align + "l"
    return format_table(headers, rows, align)


def _roles(sizes: np.ndarray, fit_up_to: int, in_fit: np.ndarray | None) -> list[str]:
    """Per row: ``"fit"`` (up to ``fit_up_to``, or as ``in_fit`` says), ``"held out"`` (64 MiB
    and up, beyond the fit), else ``""`` (between the two)."""
    from commsim.bench.calibrate import HELD_OUT_FROM

    fitted = in_fit if in_fit is not None else sizes <= fit_up_to
    held = sizes >= max(HELD_OUT_FROM, fit_up_to + 1)
    return ["fit" if f else "held out" if h else "" for f, h in zip(fitted, held, strict=True)]


def _fit_table(fit: ClusterFit) -> str:
    rows = []
    for x in fit.links:
        lat = _time(x.latency) + ("" if x.latency_determined else " (not fitted)")
        eff = f"{x.efficiency:.3f}" + ("" if x.efficiency_determined else " (not fitted)")
        small = (
            f"{_time(x.small_latency)}, {x.small_efficiency:.3f}"
            if fit.breakpoint is not None and (x.latency_determined or x.efficiency_determined)
            else "-"
        )
        rows.append([
            f"[{x.table}] {x.kind}", units.format_bandwidth(x.bandwidth), lat, eff,
            units.format_bandwidth(x.fitted_bandwidth), small,
        ])  # fmt: skip
    return format_table(
        [
            "link table",
            "configured",
            "latency/link",
            "efficiency",
            "fitted bw",
            "small-size regime",
        ],
        rows,
        "llrrrl",
    )


# -- the commands -------------------------------------------------------------------------------
def calibrate_main(args: argparse.Namespace) -> int:
    """Fit ``--cluster`` to ``--from-nccl-tests``; print the fit; write ``-o`` (or print it)."""
    request = parse(args, "calibrate")
    print(render(compute(request)), end="")
    say_plot(request.plot, request.as_json)
    return EXIT_OK


def validate_main(args: argparse.Namespace) -> int:
    """Predicted (the cluster as given) against measured, every row of the log."""
    request = parse(args, "validate")
    print(render(compute(request)), end="")
    say_plot(request.plot, request.as_json)
    return EXIT_OK


# -- plot ---------------------------------------------------------------------------------------
def _plot(
    path: Path,
    log: NcclTestsLog,
    predicted: np.ndarray,
    fit_up_to: int | None,
    breakpoint: int | None,
    label: str,
) -> None:
    """Measured points over the predicted curve (log-log); with a fit (``fit_up_to``), the fit
    range shaded and the held-out rows marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from commsim.bench.calibrate import HELD_OUT_FROM

    sizes, measured = log.sizes, log.times
    ok = sizes > 0
    order = np.argsort(sizes[ok])
    x, m, p = sizes[ok][order], measured[ok][order], predicted[ok][order]
    fig = Figure(figsize=(7.5, 6.4))
    FigureCanvasAgg(fig)
    ax, ex = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    span = {"color": "0.92", "zorder": 0}
    for a in (ax, ex):
        if fit_up_to is not None:
            a.axvspan(x.min() / 1.3, min(fit_up_to, x.max()) * 1.15, **span,
                      label=f"fit rows (<= {units.format_size(fit_up_to)})")  # fmt: skip
        if breakpoint is not None:
            a.axvline(breakpoint, color="0.5", ls=":", lw=1,
                      label=f"protocol switch ({units.format_size(breakpoint)})")  # fmt: skip
        a.grid(True, which="major", alpha=0.3)
    ax.plot(x, p, "-", color="tab:blue", lw=1.8, label=f"predicted ({label})")
    held = (x >= max(HELD_OUT_FROM, (fit_up_to or 0) + 1)) & (fit_up_to is not None)
    ax.plot(x[~held], m[~held], "o", color="black", ms=4.5, label="measured")
    err = 100 * (p / m - 1)
    ex.axhspan(-15, 15, color="tab:green", alpha=0.08, zorder=0, label="±15%")
    ex.axhline(0, color="tab:blue", lw=1)
    ex.plot(x[~held], err[~held], "o", color="black", ms=4)
    if held.any():
        ax.plot(x[held], m[held], "s", mfc="none", color="tab:red", ms=6,
                label=f"measured, held out (>= {units.format_size(HELD_OUT_FROM)})")  # fmt: skip
        ex.plot(x[held], err[held], "s", mfc="none", color="tab:red", ms=5)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [v for v in 2.0 ** np.arange(0, 64, 4) if x.min() <= v <= x.max()]
    ex.set_xticks(ticks, [units.format_size(int(v)) for v in ticks])
    lo, hi = min(m.min(), p.min()), max(m.max(), p.max())
    yt = [v for v in 10.0 ** np.arange(-9, 3) if lo / 3 <= v <= hi * 3]
    ax.set_yticks(yt, [units.format_time(v) for v in yt])
    ex.set_xlabel(f"size ({log.collective}, nccl-tests convention)")
    ax.set_ylabel("time (out-of-place)")
    ex.set_ylabel("predicted/measured - 1 (%)", fontsize=8)
    top = max(20.0, float(np.abs(err).max()) * 1.15)
    ex.set_ylim(-top, top)
    ax.set_title(f"{Path(log.source).name}: {log.collective}, {log.nranks} ranks", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise UsageError(f"--plot {path}: cannot write ({e.strerror or e})") from None
