"""``commsim sensitivity``: elasticities from the model's JAX twin."""

from __future__ import annotations

import pytest


def test_hockney_ring_elasticities_are_the_closed_form_shares(cli_json):
    """Ring allreduce: T = 2(p-1)a + 2(p-1)/p·n·b + (p-1)/p·n·g, so each elasticity is its term's
    share of T, and they add up to 1."""
    p, n = 8, 2**20
    a, b, g = 2e-6, 1 / 25e9, 1 / 100e9
    doc = cli_json("sensitivity", "-c", "allreduce", "-a", "ring", "-p", str(p), "-s", "1MiB")
    [row] = doc["results"]
    terms = {
        "alpha": 2 * (p - 1) * a,
        "beta": 2 * (p - 1) / p * n * b,
        "gamma": (p - 1) / p * n * g,
    }
    total = sum(terms.values())
    assert row["time_s"] == pytest.approx(total, rel=1e-12)
    for name, term in terms.items():
        assert row["elasticity"][name] == pytest.approx(term / total, rel=1e-9)
    assert row["buy"] == max(terms, key=terms.get)


def test_cluster_elasticities_add_up_to_one_and_name_what_to_buy(cli_json, cli):
    doc = cli_json(
        "sensitivity", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:2",
        "-s", "1KiB,1GiB",
    )  # fmt: skip
    small, big = doc["results"]
    for row in (small, big):
        assert sum(row["elasticity"].values()) == pytest.approx(1.0, rel=1e-9)
        assert row["buy"] == max(row["elasticity"], key=row["elasticity"].get)
    assert "latency" in small["buy"] and "1/bw" in big["buy"]
    code, out, _ = cli(
        "sensitivity", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:2", "-s", "1GiB"
    )
    assert code == 0 and "they add up to 1" in out and "buy" in out


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--cluster", "dgx-h100:1", "--contention", "maxmin"], "maxmin"),
        (["-p", "4", "--ports", "2"], "single-port"),
        (["-p", "4", "--plot", "x.txt"], "must end in"),
    ],
)
def test_what_the_twin_cannot_do_is_one_line(cli, args, match):
    code, _, err = cli("sensitivity", "-c", "allreduce", "-a", "ring", "-s", "1MiB", *args)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
