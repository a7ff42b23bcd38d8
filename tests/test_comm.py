"""Ring all-reduce and point-to-point transfer times, and the default TP link."""

from __future__ import annotations

import numpy as np
import pytest

from model.errors import InputError
from model.hardware.catalog import get_gpu, get_link
from model.hardware.collectives import allreduce_time_s, default_tp_link, transfer_time_s


def test_ring_allreduce_hand_derived() -> None:
    # 16 MB over 4 GPUs at 373.5 GB/s effective, 3 us per step: 2 (4 - 1) = 6 steps of 4 MB each.
    expected = 6 * (3e-6 + 4e6 / 373.5e9)  # = 82.26 us
    assert float(allreduce_time_s(16e6, 4, 373.5e9, 3e-6)) == pytest.approx(expected, rel=1e-12)
    assert float(allreduce_time_s(16e6, 1, 373.5e9, 3e-6)) == 0.0
    out = allreduce_time_s(np.array([1e3, 1e9]), np.array([[2], [8]]), 100e9, 1e-6)
    assert out.shape == (2, 2)


def test_transfer_time() -> None:
    link = get_link("pcie-gen4-x16")  # 32 GB/s x 0.8, 5 us
    expected = 3 * 5e-6 + 1e9 / (32e9 * 0.8)
    assert float(transfer_time_s(1e9, link, messages=3)) == pytest.approx(expected, rel=1e-9)
    assert float(transfer_time_s(1e9, get_link("same-gpu"))) == 0.0


def test_default_tp_links() -> None:
    assert default_tp_link(get_gpu("h100-sxm")).name == "nvlink4"
    assert default_tp_link(get_gpu("l40s")).name == "pcie-gen4-x16"
    bridge = default_tp_link(get_gpu("h100-pcie"), 2)
    assert bridge.bandwidth_bytes_per_s == get_gpu("h100-pcie").interconnect_bandwidth_bytes_per_s
    assert default_tp_link(get_gpu("h100-pcie"), 4).kind == "pcie"  # bridges join pairs only


def test_bad_comm_inputs() -> None:
    with pytest.raises(InputError, match="n_gpus"):
        allreduce_time_s(1e6, 0, 1e9, 1e-6)
    with pytest.raises(InputError, match="message_bytes"):
        allreduce_time_s(-1, 2, 1e9, 1e-6)
    with pytest.raises(InputError, match="bandwidth"):
        allreduce_time_s(1, 2, 0, 1e-6)
