"""Helper ranks (IR rule 7) in the numbers a prediction prints, and a wire format's refusals.

nccl-tests' bus bandwidth counts the ranks that hold data: a dedicated parameter server with 4
workers and 4 servers has busbw = algbw · 2(4-1)/4 = 1.5 algbw, not 2(8-1)/8. Every model's
bound takes ``helpers`` (a bound of a model that could not would be reported as 0).
"""

from __future__ import annotations

import pytest

import commsim
from commsim.errors import ParameterError
from commsim.models import Hockney, ProtocolChoice, Topology, TwoLevelHockney, compressed
from commsim.models._bounds import bound_of
from commsim.topology import switch

DEDICATED = {"servers": 4, "placement": "dedicated"}


def test_busbw_counts_the_workers():
    s = commsim.build("allreduce", "parameter_server", nranks=8, **DEDICATED)
    pred = Hockney().predict(s, 2**20)
    assert s.workers == 4
    assert pred.busbw / pred.algbw == pytest.approx(2 * 3 / 4)


@pytest.mark.parametrize(
    "model",
    [
        compressed(Hockney(), "fp16"),
        TwoLevelHockney(intra=(1e-6, 1e-11), inter=(5e-6, 1e-10), ranks_per_node=4),
    ],
    ids=["compressed", "two_level"],
)
def test_every_model_bounds_a_schedule_with_helpers(model):
    s = commsim.build("allreduce", "parameter_server", nranks=8, **DEDICATED)
    bound, _ = bound_of(model, "allreduce", 8, 2**20, s.helpers)
    assert 0 < bound <= model.predict(s, 2**20).time


def test_a_wire_with_protocol_auto_is_refused_in_words():
    auto = ProtocolChoice(lambda p: Topology(switch(8), protocol=p))
    with pytest.raises(ParameterError, match="--protocol auto is not supported"):
        compressed(auto, "fp16")
