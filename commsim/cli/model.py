"""The model argument group: message sizes and the cost model a prediction uses.

The only place that knows how a model is built from the command line: ``--alpha``, ``--beta``,
``--gamma`` and ``--ports`` become a :class:`commsim.models.Hockney`, whose constructor defaults
are the command line's defaults. Everything after :func:`parse_model` sees a
:class:`commsim.models.Model` (``predict``, ``timeline``, ``lower_bound``, ``describe``, ``to_dict``), so a
second model needs a branch here and nowhere else.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from commsim import units
from commsim.cli.arguments import add_epilog, add_sizes_argument
from commsim.cli.errors import UsageError
from commsim.cli.network import NetworkChoice
from commsim.models import PROTOCOLS, Hockney, Model, Protocol, ProtocolChoice
from commsim.profiles import load_profile

__all__ = [
    "MODELS",
    "MODEL_EPILOG",
    "add_library_group",
    "add_model_group",
    "parse_channels",
    "parse_model",
    "parse_protocol",
]

_DEFAULT = Hockney()


def _short(text: str) -> str:
    """``2.00us`` -> ``2us``, ``25.0GB/s`` -> ``25GB/s``: a value as one would type it."""
    return re.sub(r"\.?0+(?=[^\d.]|$)", "", text) if "." in text else text


_ALPHA = _short(units.format_time(_DEFAULT.alpha))
_BETA = _short(units.format_bandwidth(1 / _DEFAULT.beta))
_GAMMA = _short(units.format_bandwidth(1 / _DEFAULT.gamma))

MODEL_EPILOG = f"""\
model:
  Hockney alpha-beta-gamma: a message of b bytes costs alpha + b*beta; reducing b received
  bytes costs b*gamma. The defaults describe a 200 Gb/s (HDR) InfiniBand cluster:
  alpha = {_ALPHA} (MPI latency through one switch), beta = 1/({_BETA}) (the link's byte rate;
  --beta 200Gb/s is the same: b = bits, B = bytes), gamma = 1/({_GAMMA}) (a reduction
  near memory bandwidth; --gamma inf makes it free). With --ports K, K messages per rank are
  in flight at once but share its link: more ports save latency, never bandwidth, and the
  lower bound's latency term becomes ceil(log_(K+1) p)*alpha. With --links L, a rank has L
  independent links, each with its own beta: a schedule's channel c runs on link c mod L (a
  schedule with one channel uses one link), and the bound is the injection bound
  ceil(log_(L+1) p)*alpha + (f(p)*n*beta + g(p)*n*gamma)/L.
"""


#: A bare ``--alpha`` number (seconds) at or above this is refused: a per-message latency of a
#: millisecond or more is a unit forgotten (``--alpha 2`` meaning 2 µs), not a network.
_BARE_ALPHA_MAX = 1e-3


def parse_alpha(text: str) -> float:
    """``--alpha`` in seconds; a bare number of a millisecond or more is refused in one line
    (write the unit: ``2us``, ``2ms``, or ``2s`` where seconds are meant)."""
    seconds = units.parse_time(text)
    try:
        bare = float(text)
    except ValueError:
        return seconds
    if bare >= _BARE_ALPHA_MAX:
        raise UsageError(
            f"--alpha {text}: a bare number is seconds ({units.format_time(seconds)} per "
            f"message); write the unit: {text}us, {text}ms, or {text}s if seconds are meant"
        )
    return seconds


def add_model_group(parser: argparse.ArgumentParser, *, sizes: str) -> None:
    """Add ``-s --alpha --beta --gamma --ports`` (sizes default ``sizes``) and the model's help."""
    g = parser.add_argument_group("sizes and model (Hockney alpha-beta-gamma)")
    add_sizes_argument(g, sizes)
    g.add_argument(
        "--alpha",
        metavar="TIME",
        help=f"latency per message: 2us, 800ns, 1.5e-6 (s; a bare number of 1 ms or more is "
        f"refused as a forgotten unit) (default: {_ALPHA})",
    )
    g.add_argument(
        "--beta",
        metavar="BW",
        help="time per byte sent: a bandwidth (25GB/s, 200Gb/s) or s/B (4e-11s/B) "
        f"(default: {_BETA})",
    )
    g.add_argument(
        "--gamma",
        metavar="BW",
        help=f"time per byte reduced, same forms as --beta (default: {_GAMMA}; with --profile, "
        "it replaces the profile's reduction, its step curve included)",
    )
    g.add_argument(
        "--ports",
        metavar="single|K|multi",
        default=_DEFAULT.ports,
        help="single: a rank sends one and receives one message at a time; K (e.g. 4): K at a "
        "time, sharing the rank's link; multi: all of a step's messages at once, sharing the "
        f"link (default: {_DEFAULT.ports})",
    )
    g.add_argument(
        "--links",
        metavar="L",
        default="1",
        help="independent links per rank, each with its own beta: channel c of a schedule runs "
        "on link c mod L (default: 1)",
    )
    _add_straggler_options(g)
    g.add_argument(
        "--model",
        choices=MODELS,
        metavar="NAME",
        help="hockney (alpha-beta-gamma; with --cluster: per link class, intra- and inter-server), "
        "loggp (--loggp), or topology (the network of --topology/--cluster, with contention) "
        "(default: topology when a network is given, else hockney)",
    )
    g.add_argument(
        "--profile",
        metavar="FILE",
        help="a measured transport (`commsim calibrate -o FILE`): Hockney takes its message "
        "curve (piecewise alpha/beta) and gamma, --model loggp its L, o, g, G",
    )
    g.add_argument(
        "--loggp",
        metavar="L=..,o=..,g=..,G=..",
        help="LogGP parameters for --model loggp, e.g. L=1.5us,o=0.3us,g=0.5us,G=25GB/s "
        "(defaults: those of commsim.models.LogGP)",
    )
    g.add_argument(
        "--one-sided",
        action="store_true",
        help="--model loggp: one-sided messages (puts with a signal, as NVSHMEM or MPI-3 RMA): "
        "the receiver pays no overhead o, only the sender",
    )
    add_epilog(parser, MODEL_EPILOG)


MODELS = ("hockney", "loggp", "topology")


def _add_straggler_options(g: argparse._ArgumentGroup) -> None:
    """``--slow-rank``, ``--skew`` and ``--slow-link``: stragglers of the topology model."""
    g.add_argument(
        "--slow-rank",
        metavar="R=F,...",
        help="stragglers (topology model): rank R's transfers and reductions take F times "
        "longer, e.g. 7=2x or 3=1.5,7=2",
    )
    g.add_argument(
        "--skew",
        metavar="R=TIME,...|random:TIME",
        help="start skew (topology model): rank R starts TIME late (7=50us), or every rank at a "
        "seeded uniform time in [0, TIME] (random:50us or random:50us,seed=1)",
    )
    g.add_argument(
        "--slow-link",
        metavar="HOST[:CLASS]=F,...",
        help="degraded links (topology model): the links of host HOST (a GPU, numbered as in "
        "`commsim topology`), or only those of link class CLASS, at F times their bandwidth, "
        "F in [0, 1]; 0 is a failed link, routed around, e.g. 7:rail=0.5 or 3=0.25x",
    )


def add_library_group(parser: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """Add the collective library's options (``docs/library.md``). ``--channels C``: every
    schedule runs on C channels of its own, each on 1/C of the buffer (NCCL's channels), laid out
    by its row (:func:`commsim.algorithms.on_channels`); with ``sweep`` (the
    tuner) C is the largest of the counts 1, 2, 4, ... it tries."""
    what = (
        "try 1, 2, 4, ... up to C channels per algorithm (NCCL's channels: the schedule C "
        "times, each on 1/C of the buffer and its own channel; snake_ring and nccl_tree "
        "rotate each server's ranks per channel, spreading over its NICs) and keep the best"
        if sweep
        else "run each schedule C times, each on 1/C of the buffer and its own channel "
        "(NCCL's channels; snake_ring and nccl_tree rotate each server's ranks per channel, "
        "spreading over its NICs); a rank drives its channels at once"
    )
    group = parser.add_argument_group("collective library (docs/library.md)")
    group.add_argument("--channels", metavar="C", default=None, help=f"{what} (default: 1)")
    group.add_argument(
        "--protocol",
        metavar="NAME",
        default=None,
        help="carry messages with NCCL's protocol LL, LL128 or Simple (its per-call cost, "
        "per-message latency and bandwidth efficiency), or auto: the fastest per size, as "
        "NCCL's tuner picks it; needs the topology model (--cluster or --topology) "
        "(default: none, the links' own latency and rate)",
    )


def parse_channels(args: argparse.Namespace) -> int:
    """``--channels``: an integer >= 1 (1 when not given); anything else is one line, exit 2."""
    text = getattr(args, "channels", None)
    if text is None:
        return 1
    value = str(text).strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 6 or int(value) < 1:
        raise UsageError(f"--channels must be an integer >= 1, got {text!r}")
    return int(value)


def parse_protocol(args: argparse.Namespace) -> str | None:
    """``--protocol``: ``"LL"``, ``"LL128"``, ``"Simple"`` (any case), ``"auto"``, or ``None``."""
    text = getattr(args, "protocol", None)
    if text is None:
        return None
    names = {k.lower(): k for k in (*PROTOCOLS, "auto")}
    found = names.get(str(text).strip().lower())
    if found is None:
        raise UsageError(f"unknown protocol {text!r}: use {', '.join(PROTOCOLS)} or auto")
    return found


def parse_model(args: argparse.Namespace, network: NetworkChoice | None = None) -> Model:
    """The model of the group's options (the defaults where an option is not given): the
    topology model on ``network`` when one was chosen, else Hockney; ``--model`` overrides."""
    name = getattr(args, "model", None) or ("topology" if network is not None else "hockney")
    protocol = parse_protocol(args)
    if name != "loggp" and getattr(args, "loggp", None):
        raise UsageError("--loggp sets the LogGP model: add --model loggp")
    if name != "loggp" and getattr(args, "one_sided", False):
        raise UsageError("--one-sided is LogGP's option: add --model loggp")
    if protocol is not None and name != "topology":
        raise UsageError(
            f"--protocol needs the topology model, not {name}: give --cluster or --topology "
            "(and no --model, or --model topology)"
        )
    if name == "topology":
        if network is None:
            raise UsageError("--model topology needs a network: --topology or --cluster")
        if getattr(args, "profile", None):
            return _profiled(args, name, network)  # refuses: a profile is not a network
        if protocol == "auto":
            return ProtocolChoice(lambda p: _topology_model(args, network, p))
        return _topology_model(args, network, protocol)
    if name != "topology":
        _no_stragglers(args, "the Hockney model" if name == "hockney" else "LogGP")
    if getattr(args, "profile", None):
        return _profiled(args, name, network)
    if name == "loggp":
        if network is not None:
            raise UsageError(
                "LogGP has no network: drop --topology/--cluster, or use --model topology"
            )
        return _loggp(args)
    if network is not None:
        return _per_class_hockney(args, network)
    alpha = _DEFAULT.alpha if args.alpha is None else parse_alpha(args.alpha)
    beta = _DEFAULT.beta if args.beta is None else units.parse_bandwidth_or_inverse(args.beta)
    gamma = _DEFAULT.gamma if args.gamma is None else units.parse_bandwidth_or_inverse(args.gamma)
    try:
        return Hockney(alpha=alpha, beta=beta, gamma=gamma, ports=args.ports, links=_links(args))
    except ValueError as e:
        raise UsageError(_flag_error(e)) from None


def _links(args: argparse.Namespace) -> str:
    """``--links`` as given (Hockney checks it; commands without the option mean 1)."""
    return str(getattr(args, "links", "1"))


def _flag_error(e: ValueError) -> str:
    """A Hockney constructor error, prefixed with the option that caused it."""
    for flag in ("ports", "links"):
        if str(e).startswith(flag) or f" {flag} " in str(e):
            return f"--{flag}: {e}"
    return str(e)


def _topology_model(
    args: argparse.Namespace, network: NetworkChoice, protocol: Protocol | str | None = None
) -> Model:
    """The topology model: the links carry latency and bandwidth, so --alpha/--beta/--ports
    (Hockney's) would be ignored; refuse them rather than print a number they did not shape."""
    from commsim._cluster_model import cluster_model
    from commsim.models import Topology

    given = [
        flag
        for flag, value in (("--alpha", args.alpha), ("--beta", args.beta))
        if value is not None
    ]
    if args.ports != _DEFAULT.ports:
        given.append("--ports")
    if _links(args) != "1":
        given.append("--links")
    if given:
        raise UsageError(
            f"{', '.join(given)} set the Hockney model; on a network (--topology) every link "
            "carries its own latency and bandwidth: drop them"
        )
    gamma = None if args.gamma is None else units.parse_bandwidth_or_inverse(args.gamma)
    stragglers = _stragglers(args)
    slow_links = getattr(args, "slow_link", None)
    if slow_links:
        stragglers["link_factor"] = _link_factors(slow_links, network.network.graph)
    if network.cluster is not None:
        return cluster_model(
            network.cluster,
            placement=network.placement,
            contention=network.contention,
            gamma=gamma,
            protocol=protocol,
            port_rule=network.port_rule,
            flow_rule=network.flow_rule,
            **stragglers,
        )
    return Topology(
        network.network,
        placement=network.placement,
        contention=network.contention,
        gamma=_DEFAULT.gamma if gamma is None else gamma,
        protocol=protocol,
        port_rule=network.port_rule,
        flow_rule=network.flow_rule,
        **stragglers,
    )


def _stragglers(args: argparse.Namespace) -> dict[str, Any]:
    """``--slow-rank`` and ``--skew`` as the topology model's ``slow_ranks`` and ``start_skew``
    (each a one-line error when malformed; a rank outside the schedule is named when it runs)."""
    out: dict[str, Any] = {}
    slow = getattr(args, "slow_rank", None)
    if slow:
        factors: dict[int, float] = {}
        for item in slow.split(","):
            rank, eq, factor = item.partition("=")
            try:
                value = float(factor.strip().removesuffix("x"))
                r = int(rank)
            except ValueError:
                value, r = float("nan"), -1
            if not eq or r < 0 or not value >= 1:
                raise UsageError(
                    f"--slow-rank {item!r}: expected RANK=FACTOR with a factor >= 1, e.g. 7=2x"
                )
            factors[r] = value
        out["slow_ranks"] = factors
    skew = getattr(args, "skew", None)
    if skew:
        if skew.strip().startswith("random:"):
            out["start_skew"] = skew.strip()
        else:
            times: dict[int, float] = {}
            for item in skew.split(","):
                rank, eq, when = item.partition("=")
                try:
                    r, t = int(rank), units.parse_time(when)
                except (ValueError, units.UnitError):
                    r, t = -1, 0.0
                if not eq or r < 0:
                    raise UsageError(
                        f"--skew {item!r}: expected RANK=TIME (7=50us) or random:TIME[,seed=N]"
                    )
                times[r] = t
            out["start_skew"] = times
    return out


def _link_factors(spec: str, graph: Any) -> dict[tuple[Any, Any], float]:
    """``--slow-link HOST[:CLASS]=F,...`` as the topology model's ``link_factor``: every edge of
    host ``HOST`` (only those of class ``CLASS`` if given) at ``F`` times its bandwidth."""
    out: dict[tuple[Any, Any], float] = {}
    for item in spec.split(","):
        where, eq, factor = item.partition("=")
        host, _, kind = where.partition(":")
        try:
            f = float(factor.strip().removesuffix("x"))
            h = int(host)
        except ValueError:
            f, h = float("nan"), -1
        if not eq or h < 0 or not 0 <= f <= 1:
            raise UsageError(
                f"--slow-link {item!r}: expected HOST[:CLASS]=FACTOR with a factor in [0, 1], "
                "e.g. 7:rail=0.5"
            )
        if h not in graph:
            raise UsageError(f"--slow-link {item!r}: the network has no host {h}")
        edges = [(u, v, k) for u, v, k in graph.edges(h, data="kind")]
        chosen = [(u, v) for u, v, k in edges if not kind or k == kind.strip()]
        if not chosen:
            classes = ", ".join(sorted({str(k) for _, _, k in edges}))
            raise UsageError(
                f"--slow-link {item!r}: host {h} has no {kind!r} link (it has: {classes})"
            )
        out.update(dict.fromkeys(chosen, f))
    return out


def _no_stragglers(args: argparse.Namespace, model: str) -> None:
    """Refuse --slow-rank/--skew/--slow-link on a model that cannot express them (one line)."""
    for flag, value in (
        ("--slow-rank", "slow_rank"),
        ("--skew", "skew"),
        ("--slow-link", "slow_link"),
    ):
        if getattr(args, value, None):
            raise UsageError(
                f"{flag} needs the topology model (per-rank clocks on a network): {model} "
                "cannot express it; add --topology or --cluster"
            )


def _profiled(args: argparse.Namespace, name: str, network: NetworkChoice | None) -> Model:
    """The model of ``--profile FILE``: Hockney (or LogGP) with the measured parameters; the
    options that would set those parameters again are refused, not silently overridden."""
    from commsim.models import LogGP

    if network is not None:
        raise UsageError(
            "--profile describes one measured transport, not a network: drop --topology/"
            "--cluster, or put the profile on a link class of a cluster file "
            '([intra] profile = "FILE")'
        )
    given = [f for f, v in (("--alpha", args.alpha), ("--beta", args.beta)) if v is not None]
    if getattr(args, "loggp", None):
        given.append("--loggp")
    if given:
        raise UsageError(f"{', '.join(given)} and --profile both set the model: choose one")
    profile = load_profile(args.profile)
    if name == "loggp":
        model: Model = LogGP.from_profile(profile, one_sided=getattr(args, "one_sided", False))
    else:
        try:
            model = Hockney.from_profile(profile, ports=args.ports, links=_links(args))
        except ValueError as e:
            raise UsageError(_flag_error(e)) from None
    if args.gamma is not None:  # every reduction at this rate: the profile's step curve too
        model.gamma = units.parse_bandwidth_or_inverse(args.gamma)  # type: ignore[attr-defined]
        if isinstance(model, Hockney):
            model.reduction = None
    return model


def _loggp(args: argparse.Namespace) -> Model:
    from commsim.models import LogGP

    values: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in (args.loggp or "").split(","))):
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in ("L", "o", "g", "G", "gamma"):
            raise UsageError(f"--loggp expects L=..,o=..,g=..,G=.. (and gamma=..), got {item!r}")
        values[key.strip()] = value.strip()
    if args.gamma is not None:
        values.setdefault("gamma", args.gamma)
    for flag, value in (("--alpha", args.alpha), ("--beta", args.beta)):
        if value is not None:
            raise UsageError(f"{flag} is Hockney's; LogGP takes --loggp L=..,o=..,g=..,G=..")
    if args.ports != _DEFAULT.ports or _links(args) != "1":
        flag = "--ports" if args.ports != _DEFAULT.ports else "--links"
        raise UsageError(f"{flag} is Hockney's: LogGP sends one message at a time per rank")
    return LogGP(**values, one_sided=getattr(args, "one_sided", False))  # type: ignore[arg-type]


def _per_class_hockney(args: argparse.Namespace, network: NetworkChoice) -> Model:
    """Hockney per link class from a cluster: the latency and bottleneck bandwidth of GPU 0's
    route to GPU 1 (intra-server) and to GPU 0 of the next server (inter-server). It places
    ranks linearly and shares no link, so it refuses --placement and --contention rather than
    ignore them."""
    from commsim.models import TwoLevelHockney

    if network.placement != "linear":
        raise UsageError(
            "--model hockney places ranks linearly (consecutive ranks share a server): drop "
            "--placement, or use --model topology"
        )
    if network.contention_given:
        raise UsageError(
            "--model hockney shares no link: drop --contention, or use --model topology"
        )
    if network.port_rule != "channel":
        raise UsageError(
            "--model hockney has one port per rank: drop --port-rule, or use --model topology"
        )
    given = [f for f, v in (("--alpha", args.alpha), ("--beta", args.beta)) if v is not None]
    if args.ports != _DEFAULT.ports:
        given.append("--ports")
    if _links(args) != "1":
        given.append("--links")
    if given:  # the cluster's link classes set alpha and beta: refuse, never ignore (issue #26)
        raise UsageError(
            f"{', '.join(given)}: with --cluster/--topology, --model hockney takes alpha and "
            "beta per link class from the network; drop them, or drop the network for a bare "
            "Hockney model"
        )
    c = network.cluster
    if c is None or c.nodes < 2:
        raise UsageError(
            "--model hockney on a network needs a cluster of two or more servers (--cluster); "
            "drop --model for the topology model"
        )
    if c.profiles:
        raise UsageError(
            f"{c.name}: its measured [profiles] ({', '.join(c.profiles)}) cap message rates by "
            "size in the topology model; --model hockney takes one alpha and beta per link "
            "class: drop --model (the topology model reads them), or the profiles"
        )
    intra, inter = c.class_costs()
    gamma = c.gamma if args.gamma is None else units.parse_bandwidth_or_inverse(args.gamma)
    library = {"launch": c.launch, "reduction_overlap": c.reduction_overlap}
    return TwoLevelHockney(
        intra, inter, ranks_per_node=c.ranks_per_node, gamma=gamma or 0.0, **library
    )
