"""model.planner.redundancy: single-instance pools and goodput after a loss against a rate.

The configurations are written out by hand; the failure goodputs are hand-set numbers (the
function only compares them), so each expected line follows from the inputs shown here."""

from __future__ import annotations

import model
from model.planner.redundancy import redundancy_warnings, single_instance_pools
from model.planner.types import BestConfig, FailureImpact
from model.serving.configs import ColocatedConfig, DisaggregatedConfig


def _best(config, after: dict[str, float], style: str) -> BestConfig:
    failure = FailureImpact(after, {k: 1.0 for k in after}, {k: 1.0 for k in after})
    return BestConfig(style, "label", config, 16, 27.0, 27.0 / 16, 40.0, None, "TTFT target", failure)


H100 = model.get_gpu("h100-sxm")
LINK = model.get_link("ib-ndr-400")
DIS = DisaggregatedConfig(H100, 4, 3, H100, 4, 1, LINK)  # 3 x TP4 prefill + 1 x TP4 decode
COL = ColocatedConfig(H100, 4, 4)  # 4 x TP4 replicas


def test_a_single_decode_instance_is_named():
    b = _best(DIS, {"prefill": 16.8, "decode": 0.0}, "disaggregated")
    assert single_instance_pools(b) == ("decode",)
    lines = redundancy_warnings(b)
    assert lines == ("disaggregated: the decode pool has a single instance, so losing it stops serving "
                     "(no redundancy).",)  # fmt: skip


def test_goodput_after_a_loss_below_the_rate_is_named():
    b = _best(DIS, {"prefill": 16.8, "decode": 0.0}, "disaggregated")
    lines = redundancy_warnings(b, rate_rps=20.0)  # 16.8 < 20: flagged; decode: already named once
    assert len(lines) == 2
    assert lines[1] == (
        "disaggregated: after losing one prefill instance, goodput falls to 16.8 req/s, "
        "below the 20 req/s it must carry."
    )
    assert redundancy_warnings(b, rate_rps=16.0)[1:] == ()  # 16.8 >= 16: carried


def test_replicas_with_spares_have_no_warning():
    b = _best(COL, {"replica": 15.9}, "colocated")
    assert single_instance_pools(b) == ()
    assert redundancy_warnings(b) == ()
    assert redundancy_warnings(b, rate_rps=15.0) == ()
    assert redundancy_warnings(b, rate_rps=21.3) == (
        "colocated: after losing one replica instance, goodput falls to 15.9 req/s, below the "
        "21.3 req/s it must carry.",
    )
