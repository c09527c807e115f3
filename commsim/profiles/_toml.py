"""Profiles as TOML files: :func:`save_profile` writes what :func:`load_profile` reads.

The file is meant to be read by people too: each piece's bandwidth and each curve's fit quality
are written as comments beside the numbers, and the measured points are kept (``sizes``,
``median_s``, ``spread``), so the fit can be plotted or checked without the machine. Times are
seconds and rates seconds per byte; a hand-written file may use unit strings instead
(``alpha_s = "1.8us"``, ``beta_s_per_byte = "8GB/s"``, ``start_bytes = "64KiB"``).
"""

from __future__ import annotations

from pathlib import Path

import tomllib

from commsim import units
from commsim._toml import value, write
from commsim.errors import ParameterError
from commsim.profiles._profile import FORMAT, Profile

__all__ = ["is_profile_file", "load_profile", "save_profile"]


def load_profile(path: str | Path) -> Profile:
    """Read a profile that ``commsim calibrate`` wrote; a bad file is one line naming the field."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise ParameterError(f"cannot read profile {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ParameterError(f"profile {path} is not valid TOML: {e}") from None
    return Profile.from_dict(data, source=str(path))


def is_profile_file(path: str | Path) -> bool:
    """Whether ``path`` is a readable TOML file whose ``format`` field says it is a profile: how
    a profile ``.toml`` is told from a cluster ``.toml`` (anything else, unreadable or not
    TOML included, is ``False``, left to the other reader, whose errors name the problem).

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     mine, theirs = Path(d, "p.toml"), Path(d, "c.toml")
        ...     _ = mine.write_text('format = "commsim-profile"\\n')
        ...     _ = theirs.write_text("nodes = 2\\n")
        ...     is_profile_file(mine), is_profile_file(theirs), is_profile_file(Path(d, "no"))
        (True, False, False)
    """
    path = Path(path)
    if not path.is_file():
        return False
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return data.get("format") == FORMAT


def _dumps(profile: Profile) -> str:
    d = profile.to_dict()
    out = [
        "# commsim profile: a measured transport (`commsim calibrate`); read by --profile.",
        "# Times in seconds, rates in seconds per byte; comments give the readable values.",
    ]
    for key in ("format", "version", "backend", "nranks", "transport", "machine", "date", "notes"):
        out.append(f"{key} = {value(d[key])}")
    out += ["", "[call_overhead_s]  # seconds per executor call that moves nothing"]
    out += [f"{k} = {value(v)}  # {units.format_time(v)}" for k, v in d["call_overhead_s"].items()]
    if d["loggp"]:
        out += ["", "[loggp]  # Alexandrov et al. 1995"]
        for k, v in d["loggp"].items():
            shown = units.format_time(v) if k != "G_s_per_byte" else _rate(v)
            out.append(f"{k} = {value(v)}  # {shown}")
    for kind, c in d["curves"].items():
        out += ["", f"[curves.{kind}]"]
        out.append(
            f"r2 = {value(c['r2'])}  # relative-weighted; |residual| median "
            f"{100 * c['median_rel_residual']:.1f}%, max {100 * c['max_rel_residual']:.1f}%"
        )
        for k in ("median_rel_residual", "max_rel_residual", "points", "sizes", "median_s"):
            out.append(f"{k} = {value(c[k])}")
        out.append(f"spread = {value(c['spread'])}")
        if "intervals" in c:
            out += ["", f"[curves.{kind}.intervals]  # {c['intervals']['status']}"]
            out += [f"{k} = {value(v)}" for k, v in c["intervals"].items()]
        for p in c["pieces"]:
            out += ["", f"[[curves.{kind}.pieces]]"]
            out.append(
                f"start_bytes = {value(p['start_bytes'])}  # "
                f"{units.format_size(p['start_bytes'], exact=False)}"
            )
            out.append(f"alpha_s = {value(p['alpha_s'])}  # {units.format_time(p['alpha_s'])}")
            out.append(
                f"beta_s_per_byte = {value(p['beta_s_per_byte'])}  # {_rate(p['beta_s_per_byte'])}"
            )
    return "\n".join(out) + "\n"


def _rate(beta: float) -> str:
    return "unbounded" if beta == 0 else units.format_bandwidth(1 / beta)


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write ``profile`` as TOML at ``path``; the path. An unwritable path is one line."""
    return write(path, _dumps(profile), "profile")
