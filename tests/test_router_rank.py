"""benchmarks.router_rank's renewal count variance against hand-derived values (session 10's research
tool, docs/validation.md "Session 10: the router's follow-on and the primaries' dispersion")."""

import numpy as np

from benchmarks.router_rank import renewal_variance


def test_equal_lifetimes_give_a_bernoulli_count() -> None:
    """Lifetimes all 1: the equilibrium renewal process has one point uniform in (0, 1] and then one per
    unit, so a window t in (0, 1) holds Bernoulli(t) points (variance t (1 - t)), t = 1 exactly one,
    t = 1.5 one or two with probability 1/2 each (variance 1/4)."""
    grid = np.linspace(0.0, 4.0, 801)
    var, resid = renewal_variance(np.ones(10), grid)
    at = {t: round(float(t / grid[1])) for t in (0.25, 0.5, 1.0, 1.5)}
    assert abs(var[at[0.25]] - 0.1875) < 0.01
    assert abs(var[at[0.5]] - 0.25) < 0.01
    assert var[at[1.0]] < 0.01
    assert abs(var[at[1.5]] - 0.25) < 0.01
    # the equilibrium residual life is uniform on (0, 1): P(X_e > t) = 1 - t
    assert abs(resid[at[0.25]] - 0.75) < 0.01


def test_exponential_lifetimes_give_a_poisson_count() -> None:
    """Exponential lifetimes (mean 1, by their quantiles): the Poisson process, Var N(t) = t, and the
    residual life exponential, P(X_e > t) = exp(-t)."""
    n = 20000
    life = -np.log(1.0 - (np.arange(n) + 0.5) / n)
    grid = np.linspace(0.0, 6.0, 1201)
    var, resid = renewal_variance(life / life.mean(), grid)
    for t in (0.5, 2.0, 5.0):
        k = round(float(t / grid[1]))
        assert abs(var[k] / t - 1.0) < 0.03
        assert abs(resid[k] - np.exp(-t)) < 0.01
