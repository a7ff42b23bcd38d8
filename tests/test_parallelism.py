"""The parallelism spec: degrees, GPU counts, labels and the errors for impossible layouts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.errors import InputError
from model.hardware.parallelism import MAX_DEGREE, Parallelism


def test_gpu_counts_by_hand() -> None:
    assert Parallelism().gpus == 1
    assert Parallelism(tp=4).gpus == 4
    assert Parallelism(tp=4, pp=2).gpus == 8  # 4 GPUs per stage x 2 stages
    dep8 = Parallelism(tp=1, dp_attention=8, ep=8)  # SGLang --dp 8 --enable-dp-attention --ep 8
    assert dep8.gpus == 8 and dep8.label == "DEP8"
    wide = Parallelism(tp=1, dp_attention=32, ep=32, nodes=4)
    assert wide.gpus == 32 and wide.gpus_per_node == 8 and wide.label == "DEP32 x4 nodes"
    assert Parallelism(tp=4, pp=2).label == "TP4 PP2"
    assert Parallelism(tp=8, ep=8).label == "TP8 EP8"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tp": 0}, "parallelism.tp"),
        ({"pp": True}, "parallelism.pp"),
        ({"tp": 2.0}, "parallelism.tp"),
        ({"tp": MAX_DEGREE + 1}, "parallelism.tp"),
        ({"tp": 4, "ep": 8}, "parallelism.ep"),  # EP reuses the stage's 4 GPUs: cannot be 8
        ({"tp": 6, "ep": 4}, "parallelism.ep"),  # 4 does not divide 6
        ({"tp": 4, "nodes": 3}, "parallelism.nodes"),
    ],
)
def test_impossible_layouts_name_the_field(kwargs, field) -> None:
    with pytest.raises(InputError, match=field):
        Parallelism(**kwargs)


def test_layers_without_ep_refuse_it() -> None:
    Parallelism(tp=8).require_tp_pp_only("the roofline")
    with pytest.raises(InputError, match="parallelism.ep.*does not model expert parallelism"):
        Parallelism(tp=8, ep=8).require_tp_pp_only("the roofline")


@given(
    st.integers(1, 16),
    st.integers(1, 8),
    st.integers(1, 16),
    st.sampled_from([1, 2, 4, 8]),
)
def test_valid_specs_keep_their_invariants(tp, pp, dp, nodes) -> None:
    """Invariant: any accepted spec has gpus = tp x pp x dp and an even split over its nodes."""
    try:
        p = Parallelism(tp=tp, pp=pp, dp_attention=dp, ep=tp * dp, nodes=nodes)
    except InputError:
        assert (tp * pp * dp) % nodes != 0
        return
    assert p.gpus == tp * pp * dp and p.gpus_per_node * p.nodes == p.gpus
