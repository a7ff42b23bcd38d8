"""The verdict's tie band (issue 17): a gain under the margin keeps the colocated verdict but says it
is a tie, with the percentage, in the reasons, the flip thresholds, the JSON and the CLI text."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections import Counter
from dataclasses import replace

import pytest

import model
from model.cli import main
from model.planner.report import plan_dict
from model.planner.verdict import _no_flip_words, decide, tie_band

# The case with a 68 ms TPOT target: disaggregated 35.1875 req/s against colocated-chunked
# 33.65625 req/s on 16 x H100 in session 6, a gain of 35.1875 / 33.65625 - 1 = +4.55%, under 10%
# (+5.4% in session 7, with the router and the TTFT-correlated stalls in the colocated model: the
# tests below hold for any gain between +2% and +8%, the point being a tie under the margin). (The case ran
# at 60 ms, +4.6%, until the planner's request sample was stratified, colocated stalls got their
# busy-period spread and packed prefills their wait for the prompts behind them: at 60 ms it is now
# +8%, at 70 ms +4%. At 50 ms, the golden scenario plan_70b_h100_chat, disaggregated wins.) Session 9's
# chunked mixed-share TPOT (model.queueing.mixed_share) lowered colocated-chunked here (33.38 -> 32.31
# req/s at 68 ms: +8.3%), so the case ran at 72 ms: 33.06 against 35.0 req/s, +5.9%. Session 10's
# bulk-service prefill wait (model.queueing.bulk_wait) lowered the split here (72 ms: -5.3%; 50 ms:
# +6.9%, 60 ms: +0.9%), so the case now runs at 55 ms: 31.31 against 30.25 req/s, +3.5%. Session 11's
# prefill packing law (model.serving.packing.pool_batch) raised the split to 32.44 req/s: +7.2% at 55 ms.
# Session 12's token-full steps (model.serving.full_steps) raised it to 32.75 req/s (+8.4% at 55 ms), so
# the case runs at 60 ms: 31.03 against 32.75 req/s, +5.5%. Session 13's early passes (bulk_wait
# item 6) raised the split to 34.06 req/s (+9.8% at 60 ms, +7.4% at 65 ms), so the case runs at 70 ms: 32.69
# against 34.06 req/s, +4.2%.
KW = dict(gpus=16, workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.070, node="hgx-h100-8")


@pytest.fixture(scope="module")
def chat():
    return model.plan("llama-3.1-70b", "h100-sxm", **KW)


def test_tie_under_margin(chat):
    col, dis = chat.best["colocated-chunked"], chat.best["disaggregated"]
    assert chat.gain == pytest.approx(dis.goodput_rps / col.goodput_rps - 1.0, rel=1e-12)
    assert 0.02 < chat.gain < 0.08  # a tie under the 10% margin (0.0455 in session 6)
    assert chat.tie is True
    assert chat.verdict == "colocated-chunked"
    assert chat.reasons[0] == (
        f"tie within the 10% margin: disaggregated changes goodput by {chat.gain:+.0%} (needs +10%), so "
        "colocated-chunked is recommended (neither style is ahead by the margin)."
    )


def test_no_flip_text_says_within_margin_not_loses(chat):
    link = [f for f in chat.flip_thresholds if f.parameter == "link_bandwidth"]
    assert len(link) == 1
    assert "loses at all" not in link[0].text
    assert link[0].text.endswith(
        "disaggregation never reaches the +10% margin at any of them "
        f"(now {chat.gain:+.0%}: a tie within the margin)"
    )


def test_json_keys(chat):
    d = plan_dict(chat)
    assert d["tie"] is True
    assert d["disaggregated_gain"] == pytest.approx(chat.gain)


def test_margin_moves_the_tie(chat):
    g = chat.gain
    # a margin just above the gain that rounds to the same whole percent (0.0455 -> 5.49%): whole
    # percent would print "+5% (needs +5%)", so the gain gets one decimal
    m = (round(g * 100) + 0.49) / 100
    assert g < m and round(m * 100) == round(g * 100)
    above = model.plan("llama-3.1-70b", "h100-sxm", margin=m, thresholds=False, **KW)
    assert above.tie is True and above.verdict == "colocated-chunked"
    assert above.reasons[0].startswith(
        f"tie within the {m:.0%} margin: disaggregated changes goodput by +{g * 100:.1f}% (needs +{m:.0%})"
    )
    below = model.plan("llama-3.1-70b", "h100-sxm", margin=g - 0.005, thresholds=False, **KW)
    assert below.tie is False and below.verdict == "disaggregated"
    assert below.gain == pytest.approx(g, rel=1e-12)
    assert plan_dict(below)["tie"] is False


@pytest.mark.parametrize(
    ("dis_rps", "tie", "first"),
    [
        # 10.97 / 10 - 1 = +9.7%: whole percent would read "+10% (needs +10%)", so one decimal.
        (10.97, True, "tie within the 10% margin: disaggregated changes goodput by +9.7% (needs +10%)"),
        # colocated ahead by 10 / 9.1 - 1 = 9.9% < 10%: still a tie; gain 9.1 / 10 - 1 = -9%.
        (9.1, True, "tie within the 10% margin: disaggregated changes goodput by -9% (needs +10%)"),
        # colocated ahead by 10 / 9 - 1 = 11.1% >= 10%: colocated wins outright.
        (9.0, False, "colocated-chunked is recommended: disaggregation changes goodput by only -10%"),
        # +20% with material interference (the chat case: decode slowed well over 10%): disaggregated.
        (
            12.0,
            False,
            "disaggregated is recommended: it beats the best colocated configuration on goodput by 20%",
        ),
    ],
)
def test_band_edges_with_set_goodputs(chat, dis_rps, tie, first):
    best = dict(chat.best)
    best["colocated"] = replace(best["colocated"], goodput_rps=5.0)
    best["colocated-chunked"] = replace(best["colocated-chunked"], goodput_rps=10.0)
    best["disaggregated"] = replace(best["disaggregated"], goodput_rps=dis_rps)
    t, g = tie_band(chat.inputs, best)
    assert t is tie
    assert g == pytest.approx(dis_rps / 10.0 - 1.0)
    _, reasons = decide(chat.inputs, best, Counter(), {}, 1)
    assert reasons[0].startswith(first)


def test_no_flip_words():
    assert _no_flip_words(True, False, 0.5, 0.1) == "disaggregation wins at all of them"
    assert _no_flip_words(False, False, -0.5, 0.1) == "disaggregation loses at all of them"
    # a tie with colocated slightly ahead is still a tie, not "loses"
    assert _no_flip_words(False, True, -0.05, 0.1) == (
        "disaggregation never reaches the +10% margin at any of them (now -5%: a tie within the margin)"
    )
    assert _no_flip_words(False, True, 0.07, 0.1) == (
        "disaggregation never reaches the +10% margin at any of them (now +7%: a tie within the margin)"
    )


def test_cli_text_shows_tie():
    out = io.StringIO()
    args = shlex.split(
        "plan --model llama-3.1-70b --gpu h100-sxm --gpus 16 --workload chat --ttft-slo 500ms "
        "--tpot-slo 70ms --node hgx-h100-8 --no-thresholds"
    )
    with contextlib.redirect_stdout(out):
        assert main(args) in (0, None)
    lines = out.getvalue().splitlines()
    assert lines[0] == "verdict: colocated-chunked"
    # the gain itself follows the model (+4.5% in session 6, +4.6% with the 0.2% goodput search); the
    # line states it with its sign and the margin it needs
    m = re.fullmatch(r"tie within the 10% margin: disaggregated \+(\d+\.\d)% \(needs \+10%\)", lines[1])
    assert m is not None, lines[1]
    assert 0.0 < float(m.group(1)) < 10.0


def test_no_tie_without_both_families(chat):
    best = {k: b for k, b in chat.best.items() if k != "disaggregated"}
    assert tie_band(chat.inputs, best) == (False, None)
