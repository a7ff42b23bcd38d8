"""The goodput search: several trial rates per evaluation (multisection, for sets that can repeat
their candidates) gives exactly the goodputs of one trial rate per evaluation, in fewer
evaluations; on synthetic thresholds (hand-checkable) and on real candidate sets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from model.planner import goodput as G
from model.planner.plan import budget_sets, plan_request, resolve_inputs


@dataclass(frozen=True)
class _Limits:
    """A fake candidate set: candidate i is good at rates <= ``limit[i]``; ``evaluate`` returns the
    (rates, limits) of its rows; ``calls`` records the rows of every evaluation."""

    limit: np.ndarray
    gpus: np.ndarray
    calls: list

    @property
    def configs(self) -> list:
        return list(range(len(self.limit)))

    @property
    def n_gpus(self) -> np.ndarray:
        return self.gpus

    def evaluate(self, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(len(rates))
        return np.asarray(rates, dtype=float), self.limit

    def subset(self, mask: np.ndarray) -> _Limits:
        keep = np.nonzero(mask)[0]
        return type(self)(self.limit[keep], self.gpus[keep], self.calls)


@dataclass(frozen=True)
class _RepeatableLimits(_Limits):
    def take(self, idx: np.ndarray) -> _RepeatableLimits:
        return _RepeatableLimits(self.limit[idx], self.gpus[idx], self.calls)


def _within(res: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return res[0] <= res[1]


def _search(cls: type, limit: np.ndarray, gpus: np.ndarray) -> tuple[np.ndarray, list]:
    calls: list = []
    return G.highest_rate_rps(cls(limit, gpus, calls), _within), calls


def test_hand_checked_bracket():
    # One GPU, limit 1.3 req/s, start 0.25: doublings 0.25, 0.5, 1 good, 2 bad -> bracket [1, 2];
    # bisection keeps the lower end while (hi - lo) > 2^-10 hi: the answer is the largest
    # 1 + k/2^j <= 1.3 on the dyadic tree, within 2^-10 x hi of 1.3 and never above it.
    for cls in (_Limits, _RepeatableLimits):
        found, _ = _search(cls, np.array([1.3]), np.array([1.0]))
        assert found[0] <= 1.3
        assert 1.3 - found[0] <= G.GOODPUT_RTOL * 1.3 * 2
        assert (found[0] - 1.0) * 2**10 == int((found[0] - 1.0) * 2**10)  # a dyadic point of [1, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.just(0.0), st.floats(min_value=1e-5, max_value=5e4)), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=64),
)
def test_multisection_equals_bisection(limits, gpus):
    limit = np.array(limits)
    n_gpus = np.full(len(limit), float(gpus))
    one, calls_one = _search(_Limits, limit, n_gpus)
    many, calls_many = _search(_RepeatableLimits, limit, n_gpus)
    np.testing.assert_array_equal(many, one)  # bit for bit
    assert len(calls_many) <= len(calls_one)
    good = limit >= G.PROBE_RPS_PER_GPU * n_gpus
    assert np.all(many[~good] == 0.0)
    assert np.all(many[good] <= limit[good])
    # 16 halvings of a first bracket [0, 0.25 x GPUs] reach 2^-10 relative for limits above 2^-6 of it
    fine = good & (limit >= 0.25 * n_gpus * 2.0**-6)
    assert np.all(limit[fine] - many[fine] <= 2 * G.GOODPUT_RTOL * limit[fine])


@dataclass(frozen=True)
class _NoTake:
    """A real candidate set seen without its ``take``: the search falls back to one rate per call."""

    inner: object

    @property
    def configs(self) -> list:
        return self.inner.configs

    @property
    def n_gpus(self) -> np.ndarray:
        return self.inner.n_gpus

    def evaluate(self, rates: np.ndarray):
        return self.inner.evaluate(rates)

    def subset(self, mask: np.ndarray) -> _NoTake:
        return _NoTake(self.inner.subset(mask))


def test_real_sets_same_goodput_both_ways():
    inp = resolve_inputs(
        plan_request("llama-3.1-8b", "h100-sxm", workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.03, gpus=8)
    )
    for name, cands in budget_sets(inp, 8).items():
        feasible = cands.subset(cands.fits())
        fast = G.goodput_rps(feasible, inp.scenario.slo)
        plain = G.goodput_rps(_NoTake(feasible), inp.scenario.slo)
        np.testing.assert_array_equal(fast, plain, err_msg=name)
        assert np.all(fast > 0), name


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-3, max_value=5e4), min_size=2, max_size=40),
    st.integers(min_value=1, max_value=12),
)
def test_keep_prunes_only_what_cannot_be_among_the_best(limits, keep):
    """With ``keep`` K the K best goodputs are exactly the full search's, in the same order; the
    others are good rates (never above the full search's value) and never above the K-th best."""
    limit = np.array(limits)
    gpus = np.ones(len(limit))
    full = G.highest_rate_rps(_RepeatableLimits(limit, gpus, []), _within)
    calls: list = []
    pruned = G.highest_rate_rps(_RepeatableLimits(limit, gpus, calls), _within, keep=keep)
    k = min(keep, len(limit))
    top = np.argsort(-full, kind="stable")[:k]
    np.testing.assert_array_equal(pruned[top], full[top])
    assert np.all(pruned <= full)
    rest = np.setdiff1d(np.arange(len(limit)), top)
    assert np.all(pruned[rest] <= np.sort(full)[-k])


def test_a_goodput_does_not_depend_on_the_other_candidates():
    """Each candidate's bracket is refined to its own width: alone or in a set, the same value."""
    limit = np.array([0.3, 7.0, 1234.5])
    together = G.highest_rate_rps(_RepeatableLimits(limit, np.ones(3), []), _within)
    alone = [
        G.highest_rate_rps(_RepeatableLimits(limit[i : i + 1], np.ones(1), []), _within)[0] for i in range(3)
    ]
    np.testing.assert_array_equal(together, alone)


def test_budget_sweep_with_keep_has_the_same_best_and_top():
    """The plan's sweep refines only what can be among the best 12 of a style: the best
    configurations and each style's 12 best goodputs are those of the full search."""
    from collections import Counter

    from model.planner.plan import _sweep_budget

    inp = resolve_inputs(
        plan_request("llama-3.1-8b", "h100-sxm", workload="chat", ttft_slo_s=0.3, tpot_slo_s=0.02, gpus=16)
    )
    best_full, n_full, full, _ = _sweep_budget(inp, 16, Counter())
    best_keep, n_keep, kept, _ = _sweep_budget(inp, 16, Counter(), keep=12)
    assert n_full == n_keep
    assert {k: (b.label, b.goodput_rps) for k, b in best_full.items()} == {
        k: (b.label, b.goodput_rps) for k, b in best_keep.items()
    }
    for style, (_, g) in full.items():
        top = np.argsort(-g, kind="stable")[:12]
        np.testing.assert_array_equal(kept[style][1][top], g[top], err_msg=style)
        assert np.all(kept[style][1] <= g)
    assert len(full["disaggregated"][1]) > 12  # the keep rule had something to prune


def test_failure_goodputs_from_the_sweep_equal_their_own_search():
    """A lost-instance configuration the sweep searched takes the sweep's goodput where the sweep
    refined it, and goes on from the sweep's bracket where the ``keep`` rule stopped it early: the
    same value its own full search gives either way (a goodput does not depend on the other candidates),
    with the keep of a plan with thresholds (12) and of one without (5, the default top)."""
    from collections import Counter

    from model.planner.failures import lost_instance_goodputs
    from model.planner.plan import _sweep_budget
    from model.serving.registry import style_of

    inp = resolve_inputs(
        plan_request(
            "llama-3.1-70b",
            "h100-sxm",
            workload="code",
            ttft_slo_s=2.0,  # 1 s before session 10's bulk wait; there the best split's lost-instance
            tpot_slo_s=0.05,  # neighbour is no longer among the kept candidates (the last assert)
            gpus=64,
            link="ib-ndr-400",
        )
    )
    for keep in (12, 5):
        best, _, goodputs, known = _sweep_budget(inp, 64, Counter(), keep=keep)  # as model.plan runs it
        assert len(known) == sum(len(g) for _, g in goodputs.values())
        configs = [b.config for b in best.values()]
        reused = lost_instance_goodputs(inp.scenario, configs, known)
        searched = lost_instance_goodputs(inp.scenario, configs)
        assert reused == searched
        disagg = best["disaggregated"].config
        lost = [c for c in style_of(disagg).lose_one(disagg).values() if c is not None]
        assert any(c in known for c in lost)


def test_a_resumed_search_equals_the_uninterrupted_one():
    """Resuming a ``keep`` search from its end states (Brackets) gives every candidate the value of
    the full search, and evaluates nothing for candidates already refined."""
    limit = np.array([0.3, 7.0, 1234.5, 55.0, 0.0])
    gpus = np.ones(len(limit))
    full = G.highest_rate_rps(_RepeatableLimits(limit, gpus, []), _within)
    partial = G.search_brackets(_RepeatableLimits(limit, gpus, []), _within, 0.25, 1, None)
    assert not partial.refined().all()  # keep=1 left some brackets wide
    np.testing.assert_array_equal(partial.value()[np.argmax(full)], full.max())
    calls: list = []
    resumed = G.search_brackets(_RepeatableLimits(limit, gpus, calls), _within, 0.25, None, partial)
    np.testing.assert_array_equal(resumed.value(), full)
    assert resumed.refined().all()
    done = G.search_brackets(_RepeatableLimits(limit, gpus, calls := []), _within, 0.25, None, resumed)
    assert calls == [] and np.array_equal(done.value(), full)


def test_trials_test_only_the_rows_read() -> None:
    """goodput._Trials: with a row-wise test, only the (candidate, trial) pairs read are tested, each
    once, and their outcomes are the all-at-once test's; without one, everything is tested at once."""
    from model.planner.goodput import _Trials

    outcomes = np.array([True, False, True, True, False, False])  # 2 candidates x 3 trials
    asked: list[list[int]] = []

    class RowWise:
        def __call__(self, res):
            return outcomes

        def rows(self, res, idx):
            asked.append(list(idx))
            return outcomes[idx]

    trials = _Trials(None, RowWise(), (2, 3))
    assert list(trials.read(np.array([0, 1]), np.array([1, 1]))) == [False, False]
    assert list(trials.read(np.array([0, 1, 1]), np.array([1, 0, 1]))) == [False, True, False]
    assert asked == [[1, 4], [3]]  # flat rows i * 3 + j, each tested once
    plain = _Trials(None, lambda res: outcomes, (2, 3))
    assert list(plain.read(np.array([1]), np.array([2]))) == [False]
