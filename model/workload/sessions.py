"""Multi-turn and agentic sessions: turns with think time between them, each turn's prompt the whole
conversation so far, and the prefix-cache hit rate that structure implies.

A session starts with a shared system prompt (``system_tokens``, the same for every session: a
chat service's instructions, an agent's tool definitions) and a first user message; turn t + 1's
prompt is turn t's prompt, its answer and a new message (the user's next question, or a tool's
output in an agent loop): P_{t+1} = P_t + O_t + U_{t+1}. The turn count is geometric with mean
``turns_mean`` (at least 1), think times are exponential with mean ``think_time_s`` (counted from
the end of the answer, streamed at ``answer_s_per_token``) and a session ends early once its
context passes ``max_context_tokens``.

Hit rate implied by the structure (a cache that still holds the session when its next turn arrives;
vLLM and SGLang cache whole blocks only):

- where the whole previous turn ran (a colocated replica, with cache-aware routing so a session
  returns to it): turn t + 1 finds floor((P_t + O_t) / B) B tokens cached (turn 1 finds the system
  prompt's full blocks, cached by earlier sessions);
- a disaggregated prefill instance held only the previous prompt (the answer was decoded
  elsewhere): floor(P_t / B) B, unless the answer's KV is sent back (Mooncake's store does that);
- the decode instance that decoded turn t holds P_t + O_t, so only the new message's KV (and any
  block it completes) crosses the link.

The implied rates are token-weighted means over a seeded sample of sessions
(:func:`implied_hit_rates`); the simulator measures them with LRU caches of real capacity
(model.sim.prefix_cache), so a cache too small to hold sessions over their think time shows up there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammainc

from model.errors import InputError, check_whole
from model.workload.lengths import LengthDist, check_rng

__all__ = [
    "HitRates",
    "SessionShape",
    "SessionTrace",
    "cached_implied_hit_rates",
    "capacity_hit_rate",
    "capacity_hit_rates",
    "footprint_moments",
    "history_hit_probability",
    "history_split_cached_tokens",
    "history_split_missed",
    "implied_hit_rates",
    "session_rows",
    "session_trace",
]

# A session stops after this many turns whatever the geometric draw (bounds generated work).
MAX_TURNS = 256
# Engine KV block size the session generator hashes by (vLLM's default block_size, 16 tokens).
SESSION_BLOCK_TOKENS = 16
# Sessions drawn to estimate the implied hit rates (seeded: the rates are deterministic).
IMPLIED_SAMPLE_SESSIONS = 2000


@dataclass(frozen=True)
class SessionShape:
    """The shape of a multi-turn session; see the module docstring."""

    system_tokens: int
    first_message_tokens: LengthDist
    message_tokens: LengthDist
    output_tokens: LengthDist
    turns_mean: float
    think_time_s: float
    max_context_tokens: int = 131072
    block_tokens: int = SESSION_BLOCK_TOKENS
    answer_s_per_token: float = 0.03
    source: str = ""

    def __post_init__(self) -> None:
        check_whole("system_tokens", self.system_tokens, 0)
        check_whole("max_context_tokens", self.max_context_tokens, 1)
        check_whole("block_tokens", self.block_tokens, 1)
        for f in ("first_message_tokens", "message_tokens", "output_tokens"):
            if not isinstance(getattr(self, f), LengthDist):
                raise InputError(f, getattr(self, f), "a LengthDist (Fixed, LogNormal, ...)")
        t = self.turns_mean
        if isinstance(t, bool) or not isinstance(t, int | float) or not 1.0 <= t <= MAX_TURNS:
            raise InputError("turns_mean", t, f"a mean turn count in [1, {MAX_TURNS}]")
        for name in ("think_time_s", "answer_s_per_token"):
            s = getattr(self, name)
            if isinstance(s, bool) or not isinstance(s, int | float) or not (math.isfinite(s) and s >= 0):
                raise InputError(name, s, "a time >= 0 s")

    @property
    def hit_rate(self) -> float:
        """The implied hit rate where the whole previous turn ran (colocated; module docstring)."""
        return implied_hit_rates(self).colocated


@dataclass(frozen=True, eq=False)
class SessionTrace:
    """Generated session requests in arrival order, with per-request block ids (prompt then output)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    session_ids: np.ndarray
    turn: np.ndarray
    hash_ids: tuple[tuple, ...]
    block_tokens: int


def session_rows(shape: SessionShape, n_sessions: int, rng: np.random.Generator):
    """Per session: lists of (prompt, output) per turn and think times (lengths drawn in bulk)."""
    turns = np.minimum(rng.geometric(1.0 / shape.turns_mean, n_sessions), MAX_TURNS)
    total = int(turns.sum())
    first = shape.first_message_tokens.sample(n_sessions, rng)
    msgs = shape.message_tokens.sample(total, rng)
    outs = shape.output_tokens.sample(total, rng)
    think = rng.exponential(shape.think_time_s, total) if shape.think_time_s > 0 else np.zeros(total)
    k = 0
    for s in range(n_sessions):
        prompt = shape.system_tokens + int(first[s])
        rows = []
        for t in range(int(turns[s])):
            if t > 0:
                prompt = prompt + rows[-1][1] + int(msgs[k])
            if prompt + int(outs[k]) > shape.max_context_tokens:
                k += int(turns[s]) - t
                break
            rows.append((prompt, int(outs[k]), float(think[k])))
            k += 1
        if not rows:  # even the first turn is too long: keep it, capped
            p = min(shape.system_tokens + int(first[s]), shape.max_context_tokens - 1)
            rows.append((p, max(min(int(outs[0]), shape.max_context_tokens - p), 1), 0.0))
        yield rows


def _block_ids(shape: SessionShape, s: int, t: int, prompt: int, output: int) -> tuple:
    """Ids of the blocks of turn t of session s over its prompt and output: the system prompt's full
    blocks are shared by every session; a session's other full blocks keep their id across its turns
    (its context only grows); the last, partial block is this turn's own."""
    b = shape.block_tokens
    total = prompt + output
    shared = shape.system_tokens // b
    full = total // b
    ids = [("sys", j) for j in range(min(shared, full))]
    ids += [(s, j) for j in range(shared, full)]
    if total % b:
        ids.append((s, "tail", t))
    return tuple(ids)


def _session_span_s(shape: SessionShape) -> float:
    """Mean duration of a session: its turns' answer and think times (the generator's lead-in)."""
    return shape.turns_mean * (shape.output_tokens.mean() * shape.answer_s_per_token + shape.think_time_s)


def session_trace(shape: SessionShape, rate_rps: float, n: int, seed: int = 0) -> SessionTrace:
    """``n`` requests of sessions starting as a Poisson process of rate ``rate_rps`` / (mean turns
    per session); turn t + 1 arrives O_t x ``answer_s_per_token`` (the answer's streaming time at
    that TPOT, e.g. the SLO's) plus a think time after turn t. Open loop: the simulator replays these
    times and does not wait for the actual answer, so a session whose answer is slower than assumed
    sends its next turn early (it then finds only the previous prompt cached). The trace starts in
    steady state (sessions that began before 0 s contribute their later turns); a run's caches still
    start empty, so the first requests of a run (about rate x a session's span) are warm-up."""
    n = check_whole("requests", n, 1)
    if not (isinstance(rate_rps, int | float) and math.isfinite(rate_rps) and rate_rps > 0):
        raise InputError("rate_rps", rate_rps, "a rate > 0 req/s")
    rng = check_rng(np.random.default_rng(seed))
    rows: list[tuple[float, int, int, int, int]] = []
    # Start in steady state: sessions begin from -lead on, and only arrivals at t >= 0 are kept, so
    # the trace has later turns of older sessions from its first second (no ramp of first turns).
    lead = _session_span_s(shape) * 3.0
    start = -lead
    mean_turns = shape.turns_mean
    s = 0
    kept = 0
    while kept < n or start < 0 or start < sorted(r[0] for r in rows)[n - 1]:
        for sess in session_rows(shape, 64, rng):
            start += rng.exponential(mean_turns / rate_rps)
            t_arr = start
            for t, (p, o, think) in enumerate(sess):
                if t_arr >= 0:
                    rows.append((t_arr, s, t, p, o))
                    kept += 1
                t_arr += o * shape.answer_s_per_token + think
            s += 1
    rows.sort(key=lambda x: (x[0], x[1], x[2]))
    rows = rows[:n]
    return SessionTrace(
        arrival_s=np.array([r[0] for r in rows]),
        prompt_tokens=np.array([r[3] for r in rows], dtype=np.int64),
        output_tokens=np.array([r[4] for r in rows], dtype=np.int64),
        session_ids=np.array([r[1] for r in rows], dtype=object),
        turn=np.array([r[2] for r in rows], dtype=np.int64),
        hash_ids=tuple(_block_ids(shape, r[1], r[2], r[3], r[4]) for r in rows),
        block_tokens=shape.block_tokens,
    )


@dataclass(frozen=True)
class HitRates:
    """Implied prefix-cache hit rates (fractions of prompt tokens); see the module docstring."""

    colocated: float  # the whole previous turn cached where the next prefill runs
    prefill_pool: float  # only the previous prompt (disaggregated prefill instance)
    decode: float  # held by the decode instance of the previous turn (not transferred again)
    system: float = 0.0  # the shared system prompt's part alone (hit whatever the cache size)


def implied_hit_rates(
    shape: SessionShape, sessions: int = IMPLIED_SAMPLE_SESSIONS, seed: int = 0
) -> HitRates:
    """Token-weighted hit rates over ``sessions`` seeded sessions (module docstring), at most
    prompt - 1 tokens per turn (the last prompt token is always computed)."""
    b = shape.block_tokens
    sys_cached = (shape.system_tokens // b) * b
    prompt_sum = col = pre = sys = 0.0
    for rows in session_rows(shape, sessions, np.random.default_rng(seed)):
        prev = None
        for p, o, _ in rows:
            prompt_sum += p
            cap = p - 1
            sys += min(sys_cached, cap)
            if prev is None:
                col += min(sys_cached, cap)
                pre += min(sys_cached, cap)
            else:
                col += min(((prev[0] + prev[1]) // b) * b, cap)
                pre += min(max((prev[0] // b) * b, sys_cached), cap)
            prev = (p, o)
    h_col, h_pre = col / prompt_sum, pre / prompt_sum
    return HitRates(h_col, h_pre, h_col, sys / prompt_sum)


# Midpoint quantiles per factor of the gap between a session's turns (answer streaming x think time:
# GAP_QUANTILES^2 stratified gaps) over which the hit probability is averaged.
GAP_QUANTILES = 8


def capacity_hit_rate(
    shape: SessionShape,
    rate_per_instance_rps: float,
    capacity_tokens: float,
    implied: float | None = None,
    holds_output: bool = True,
) -> float:
    """The hit rate where a session's turns return to one instance whose LRU cache holds
    ``capacity_tokens``, at ``rate_per_instance_rps`` requests per second on it.

    Characteristic-time approximation of LRU (Che, Tung and Wang, IEEE JSAC 20(7), 2002; Fricker,
    Robert and Roberts, ITC 2012), with the session histories as the cached objects: an LRU cache
    holds exactly the objects referenced within the last T_C, so T_C solves C = sum over objects of
    size x P(last reference < T_C ago). A history is referenced by each turn and again by the next
    turn after a gap G = a + Exp(theta) (a = E[O] x answer_s_per_token, theta the think time); after
    a session's last turn it stays until evicted. By Little's law on token-seconds the cache then
    holds C - S_sys = lambda_i E[(S_t - S_sys) w_t(T_C)], S_t the history after turn t (its prompt,
    plus its answer where the answer was decoded here: ``holds_output``), S_sys the shared system
    prompt's cached blocks, w_t(T) = E[min(G, T)] = min(T, a) + theta (1 - exp(-(T - a)^+ / theta))
    for a turn with a successor and T for a last turn (the turn sample of
    :func:`implied_hit_rates`). A turn finds its history with probability s = P(G < T_C) =
    1 - exp(-(T_C - a) / theta) (0 when T_C <= a), and the system prompt always:
    h = h_sys + s (h_implied - h_sys) (h_implied: the colocated rate unless given).
    """
    lam = float(rate_per_instance_rps)
    if not (math.isfinite(lam) and lam >= 0 and math.isfinite(capacity_tokens) and capacity_tokens >= 0):
        raise InputError(
            "rate_per_instance_rps / capacity_tokens", (lam, capacity_tokens), "finite values >= 0"
        )
    cap = np.array([float(capacity_tokens)])
    return float(capacity_hit_rates(shape, np.array([lam]), cap, implied, holds_output)[0])


def capacity_hit_rates(
    shape: SessionShape,
    rate_per_instance_rps: np.ndarray,
    capacity_tokens: np.ndarray,
    implied: float | None = None,
    holds_output: bool = True,
) -> np.ndarray:
    """:func:`capacity_hit_rate` over arrays of rates and capacities (same shape; rates >= 0,
    capacities >= 0; a rate of 0 keeps the implied rate), for the planner's vectorised evaluation."""
    rates, _ = _implied_and_lengths(shape)
    h_full = rates.colocated if implied is None else float(implied)
    h_sys = min(rates.system, h_full)
    lam, cap = np.broadcast_arrays(
        np.asarray(rate_per_instance_rps, dtype=float), np.asarray(capacity_tokens, dtype=float)
    )
    s = history_hit_probability(shape, lam, cap, holds_output)
    return np.where(lam > 0, h_sys + s * (h_full - h_sys), h_full)


def history_hit_probability(
    shape: SessionShape, rate_per_instance_rps: np.ndarray, capacity_tokens: np.ndarray, holds_output: bool
) -> np.ndarray:
    """P(a turn finds its session's history cached), 1 at a rate of 0.

    A turn whose history was last referenced a gap G ago finds it iff the histories referenced since
    then fit in the cache: F(G) <= C - S_sys (LRU order). The turns form a marked Poisson process
    (rate lambda_i; marks: history size S and holding time D = min(G', t), G' the turn's own gap to
    its successor, D = t after a session's last turn), so the footprint F(t) of the histories
    referenced within t is shot noise with, by Campbell's theorem (Kingman, "Poisson Processes",
    1993, sec. 3.2), mean lambda_i E[S D] and variance lambda_i E[S^2 D] (:func:`footprint_moments`).
    Taking F(t) normal (a sum over the live sessions), s = E_G[Phi((C - S_sys - E F(G)) / sd F(G))]
    over GAP_QUANTILES^2 stratified gaps. With many small histories sd F -> 0 and s -> P(G < T_C), Che et
    al.'s characteristic-time rate; an instance's cache holds a few tens of agent histories, where the
    footprint's spread smooths that cliff."""
    lam = np.asarray(rate_per_instance_rps, dtype=float)
    s = np.mean(_gap_hit_probabilities(shape, rate_per_instance_rps, capacity_tokens, holds_output), axis=-1)
    return np.where(lam > 0, s, 1.0)


def _gap_hit_probabilities(
    shape: SessionShape, rate_per_instance_rps: np.ndarray, capacity_tokens: np.ndarray, holds_output: bool
) -> np.ndarray:
    """p_G = P(F(G) <= C - S_sys) [..., GAP_QUANTILES^2] at the stratified gaps, F(G) gamma with
    Campbell's moments (:func:`history_hit_probability`); 0 where the room is not positive."""
    lam, cap = np.broadcast_arrays(
        np.asarray(rate_per_instance_rps, dtype=float), np.asarray(capacity_tokens, dtype=float)
    )
    m1, m2, _, _ = footprint_moments(shape, holds_output)
    sys_cached = float((shape.system_tokens // shape.block_tokens) * shape.block_tokens)
    room = (cap - sys_cached)[..., None]  # the system prompt's blocks are held once, for every session
    rate = lam[..., None]
    mean, var = rate * m1, np.maximum(rate * m2, 1e-300)
    p = gammainc(mean * mean / var, np.maximum(room, 0.0) * mean / var)
    return np.where(room > 0, p, 0.0)


def turn_gaps_s(shape: SessionShape, output_tokens: np.ndarray, exp_quantiles: np.ndarray) -> np.ndarray:
    """Gaps between a session's turns [len(output_tokens), len(exp_quantiles)]: the answer's
    streaming, O x answer_s_per_token, then a think time at each given quantile of Exp(think_time_s)
    (the generator's law, :func:`session_trace`)."""
    think = -shape.think_time_s * np.log1p(-np.asarray(exp_quantiles, dtype=float))
    return np.asarray(output_tokens, dtype=float)[:, None] * shape.answer_s_per_token + think[None, :]


def footprint_moments(shape: SessionShape, holds_output: bool) -> tuple[np.ndarray, ...]:
    """(E[S D(g)], E[S^2 D(g)], E[S D(g); live], E[S^2 D(g)^2 / E[G']; live]) per turn at each
    stratified gap g (:func:`history_hit_probability`; the last two over the turns with a successor,
    the live sessions' part, model.workload.session_levels):
    the gaps' answer part at the midpoint quantiles of the sampled answers (of turns with a
    successor), crossed with midpoint quantiles of the think time; D(g) = E[min(G', g)] over the
    turn's own think time for a turn with a successor (G' = its answer's streaming + Exp(theta)), g
    for a session's last turn."""
    key = (id(shape), holds_output)
    hit = _MOMENT_CACHE.get(key)
    if hit is not None and hit[0] is shape:
        return hit[1:]
    size, out, succ = _cached(shape)[3]
    x = size[:, 1 if holds_output else 0]
    k = GAP_QUANTILES
    u = (np.arange(k) + 0.5) / k
    answers = np.quantile(out[succ] if succ.any() else out, u)  # one-turn sessions: any answer
    g = turn_gaps_s(shape, answers, u).reshape(-1)  # [k * k] stratified gaps
    lead = out[succ][:, None] * shape.answer_s_per_token
    theta = float(shape.think_time_s)
    if theta > 0:
        d = np.minimum(g[None, :], lead) + theta * -np.expm1(-np.maximum(g[None, :] - lead, 0.0) / theta)
    else:
        d = np.minimum(g[None, :], lead)
    n = len(x)
    xs, xl = x[succ], x[~succ]
    m1 = (xs @ d + xl.sum() * g) / n
    m2 = ((xs * xs) @ d + (xl * xl).sum() * g) / n
    live1 = (xs @ d) / n
    live2 = ((xs * xs / np.maximum(lead[:, 0] + theta, 1e-12)) @ (d * d)) / n  # E[G'] = streaming + theta
    if len(_MOMENT_CACHE) > 64:
        _MOMENT_CACHE.clear()
    _MOMENT_CACHE[key] = (shape, m1, m2, live1, live2)
    return m1, m2, live1, live2


_MOMENT_CACHE: dict[tuple[int, bool], tuple] = {}


def history_split_cached_tokens(
    shape: SessionShape, prompt_tokens: np.ndarray, hit_rate: float, implied: float
) -> np.ndarray:
    """Cached prompt tokens per sampled request at a capacity-limited ``hit_rate`` below the
    ``implied`` one: an LRU evicts a history from its first block on, so a turn either finds its
    whole history (then floor(h_implied x P)) or only the system prompt's blocks (:func:`capacity_hit_rate`:
    h = h_sys + s (h_implied - h_sys)). The share 1 - s of the requests that miss is taken
    deterministically and evenly over the prompt-length ranks (the miss does not depend on the
    turn's length in that law), so the prefill service's mean and second moment are those of the
    hit / miss mixture: E[t] = s E[t_hit] + (1 - s) E[t_miss], E[t^2] likewise."""
    p = np.asarray(prompt_tokens, dtype=float)
    h_sys = min(cached_implied_hit_rates(shape).system, implied)
    if hit_rate >= implied or implied <= h_sys:
        return np.minimum(np.floor(p * hit_rate), p - 1.0)
    missed = history_split_missed(shape, p, hit_rate, implied)
    sys_cached = float((shape.system_tokens // shape.block_tokens) * shape.block_tokens)
    hit = np.floor(p * implied)
    return np.minimum(np.where(missed, sys_cached, hit), p - 1.0)


def history_split_missed(
    shape: SessionShape, prompt_tokens: np.ndarray, hit_rate: float, implied: float
) -> np.ndarray:
    """Which sampled requests miss their history in :func:`history_split_cached_tokens` [S] (bool):
    a share 1 - s = 1 - (h - h_sys) / (h_implied - h_sys), evenly over the prompt-length ranks; none
    at or above the implied rate."""
    p = np.asarray(prompt_tokens, dtype=float)
    h_sys = min(cached_implied_hit_rates(shape).system, implied)
    if hit_rate >= implied or implied <= h_sys:
        return np.zeros(len(p), dtype=bool)
    miss = max(0.0, min(1.0, 1.0 - (hit_rate - h_sys) / (implied - h_sys)))
    rank = np.empty(len(p), dtype=float)
    rank[np.argsort(p, kind="stable")] = np.arange(len(p))
    return np.floor((rank + 1.0) * miss + 1e-9) > np.floor(rank * miss + 1e-9)  # n x miss, evenly


# Implied rates, mean turn lengths and history token means per shape (2,000-session loops), by identity.
_SHAPE_CACHE: dict[int, tuple[SessionShape, HitRates, tuple[float, float], tuple]] = {}


def cached_implied_hit_rates(shape: SessionShape) -> HitRates:
    """:func:`implied_hit_rates` with its defaults, computed once per shape object."""
    return _implied_and_lengths(shape)[0]


def _implied_and_lengths(shape: SessionShape) -> tuple[HitRates, tuple[float, float]]:
    """(implied_hit_rates(shape), _mean_turn_lengths(shape)), computed once per shape object."""
    hit = _cached(shape)
    return hit[1], hit[2]


def _cached(shape: SessionShape) -> tuple[SessionShape, HitRates, tuple[float, float], tuple]:
    hit = _SHAPE_CACHE.get(id(shape))
    if hit is None or hit[0] is not shape:
        hit = (shape, implied_hit_rates(shape), _mean_turn_lengths(shape), _history_sample(shape))
        if len(_SHAPE_CACHE) > 64:
            _SHAPE_CACHE.clear()
        _SHAPE_CACHE[id(shape)] = hit
    return hit


def _history_sample(shape: SessionShape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per turn of the seeded sample of :func:`implied_hit_rates`: ([n, 2] history tokens beyond the
    system prompt's blocks, whole blocks of the prompt and of prompt + answer; [n] answer tokens;
    [n] whether the session has a next turn)."""
    b = shape.block_tokens
    sys_cached = (shape.system_tokens // b) * b
    size, out, succ = [], [], []
    for rows in session_rows(shape, IMPLIED_SAMPLE_SESSIONS, np.random.default_rng(0)):
        for t, (p, o, _) in enumerate(rows):
            size.append((max((p // b) * b - sys_cached, 0), max(((p + o) // b) * b - sys_cached, 0)))
            out.append(o)
            succ.append(t < len(rows) - 1)
    return np.array(size, dtype=float), np.array(out, dtype=float), np.array(succ, dtype=bool)


def _mean_turn_lengths(shape: SessionShape) -> tuple[float, float]:
    """(mean prompt, mean output) per turn over the seeded sample of :func:`implied_hit_rates`."""
    p = o = 0.0
    k = 0
    for rows in session_rows(shape, IMPLIED_SAMPLE_SESSIONS, np.random.default_rng(0)):
        for pp, oo, _ in rows:
            p += pp
            o += oo
            k += 1
    return p / k, o / k
