"""Workloads: the joint request sampler over a prompt and an output length distribution, and presets.

A :class:`Workload` pairs a prompt distribution with an output distribution (model.workload.lengths)
and says how requests are drawn: independently, as whole (prompt, output) pairs from a trace, or as a
mixture of workloads (each request's pair comes from one component).

Presets (:func:`get_workload`) carry the published statistics they were built from
(:class:`PublishedStats`); docs/workloads.md compares them with the real Azure traces.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from model.errors import InputError, UnknownNameError
from model.workload.lengths import (
    STRATUM_POINTS,
    Empirical,
    LengthDist,
    LogNormal,
    Mixture,
    QuantileTable,
    Uniform,
    check_n,
    check_rng,
    stratum_levels,
)
from model.workload.sessions import IMPLIED_SAMPLE_SESSIONS, SessionShape, implied_hit_rates, session_rows

if TYPE_CHECKING:
    from model.workload.traces import Trace

__all__ = ["PublishedStats", "Workload", "get_workload", "list_workloads"]

# --------------------------------------------------------------------------------------------
# workloads


def _largest_remainder(n: int, weights: np.ndarray) -> np.ndarray:
    """Whole counts summing to n in proportion to ``weights`` (Hamilton's largest-remainder rule)."""
    share = n * np.asarray(weights, dtype=float) / float(np.sum(weights))
    counts = np.floor(share).astype(np.int64)
    short = n - int(counts.sum())
    counts[np.argsort(-(share - counts), kind="stable")[:short]] += 1
    return counts


@dataclass(frozen=True)
class PublishedStats:
    """Published summary statistics a preset was built from (tokens), and where they come from."""

    prompt_mean: float
    prompt_median: float
    prompt_p90: float
    output_mean: float
    output_median: float
    output_p90: float
    citation: str


@dataclass(frozen=True, eq=False)
class Workload:
    """A request mix: prompt and output token-length distributions and how to draw pairs.

    ``prefix_cache_hit_rate`` is the fraction of prompt tokens already in a prefix cache (0..1) where
    prefill runs; ``decode_prefix_hit_rate`` the fraction whose KV a decode instance already holds
    (earlier turns of a session it decoded), which disaggregated serving does not send again;
    ``prefill_pool_hit_rate`` the rate on a disaggregated prefill instance when it differs (it holds
    earlier prompts but not the answers decoded elsewhere; None: ``prefix_cache_hit_rate``).
    ``block_hashes`` (from a trace with Mooncake ``hash_ids``) lets the planner replay the trace
    through LRU prefix caches (model.planner.prefix); ``sessions`` describes multi-turn sessions
    (model.workload.sessions) for the simulator's request generator.
    ``pairs`` (n x 2, int64) makes :meth:`sample_requests` resample whole (prompt, output) pairs of a
    trace; ``parts`` (weights, workloads) makes it draw each request from one component workload.
    """

    name: str
    prompt_tokens: LengthDist
    output_tokens: LengthDist
    prefix_cache_hit_rate: float = 0.0
    source: str = ""
    description: str = ""
    published: PublishedStats | None = None
    pairs: np.ndarray | None = field(default=None, repr=False)
    parts: tuple[tuple[float, Workload], ...] = field(default=(), repr=False)
    decode_prefix_hit_rate: float = 0.0
    prefill_pool_hit_rate: float | None = None
    block_hashes: tuple[tuple, ...] | None = field(default=None, repr=False)
    sessions: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("prefix_cache_hit_rate", "decode_prefix_hit_rate", "prefill_pool_hit_rate"):
            h = getattr(self, name)
            if h is None and name == "prefill_pool_hit_rate":
                continue
            if isinstance(h, bool) or not isinstance(h, int | float) or not (0.0 <= h <= 1.0):
                raise InputError(name, h, "a fraction of prompt tokens in [0, 1]")
        for f in ("prompt_tokens", "output_tokens"):
            if not isinstance(getattr(self, f), LengthDist):
                raise InputError(f, getattr(self, f), "a LengthDist (Fixed, LogNormal, Empirical, ...)")

    @property
    def mean_prompt_tokens(self) -> float:
        """E[prompt tokens]."""
        return self.prompt_tokens.mean()

    @property
    def mean_output_tokens(self) -> float:
        """E[output tokens]."""
        return self.output_tokens.mean()

    @property
    def mean_uncached_prompt_tokens(self) -> float:
        """E[prompt tokens] * (1 - prefix_cache_hit_rate): tokens prefill must compute."""
        return self.mean_prompt_tokens * (1.0 - self.prefix_cache_hit_rate)

    def sample_requests(
        self, n: int, rng: np.random.Generator, *, stratified: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(prompt_tokens, output_tokens) int64 arrays of length n; pairs stay together for traces.

        ``stratified``: one request per probability stratum instead of n independent draws, so a
        small sample carries the law's moments (the planner's sample,
        :attr:`model.workload.scenario.Scenario.requests`; the simulator draws independently,
        model.sim.requests): independent prompt and output laws each give their stratum means
        (:meth:`model.workload.lengths.LengthDist.stratified`), paired at random; a trace's pairs,
        sorted by prompt, give the pair in the middle of each stratum; a mix of workloads gives each
        part its share of n (largest remainders) and stratifies within it."""
        n = check_n(n)
        rng = check_rng(rng)
        if self.pairs is not None:
            if not stratified:
                idx = rng.integers(0, len(self.pairs), n)
            else:
                order = np.lexsort((self.pairs[:, 1], self.pairs[:, 0]))
                mid = stratum_levels(n)[:, STRATUM_POINTS // 2]
                idx = order[np.minimum((mid * len(order)).astype(np.int64), len(order) - 1)]
                idx = idx[rng.permutation(n)]
            return self.pairs[idx, 0].copy(), self.pairs[idx, 1].copy()
        if self.parts:
            w = np.array([p[0] for p in self.parts])
            if not stratified:
                which = rng.choice(len(w), size=n, p=w / w.sum())
            else:
                which = rng.permutation(np.repeat(np.arange(len(w)), _largest_remainder(n, w)))
            prompt = np.empty(n, dtype=np.int64)
            output = np.empty(n, dtype=np.int64)
            for i, (_, wl) in enumerate(self.parts):
                m = which == i
                prompt[m], output[m] = wl.sample_requests(int(m.sum()), rng, stratified=stratified)
            return prompt, output
        if stratified:
            return self.prompt_tokens.stratified(n, rng), self.output_tokens.stratified(n, rng)
        return self.prompt_tokens.sample(n, rng), self.output_tokens.sample(n, rng)

    @classmethod
    def from_trace(
        cls, trace: Trace, name: str | None = None, prefix_cache_hit_rate: float = 0.0
    ) -> Workload:
        """Empirical workload that resamples the trace's (prompt, output) pairs together."""
        pairs = np.column_stack([trace.prompt_tokens, trace.output_tokens]).astype(np.int64)
        return cls(
            name=name or f"trace:{trace.source}",
            prompt_tokens=Empirical(pairs[:, 0]),
            output_tokens=Empirical(pairs[:, 1]),
            prefix_cache_hit_rate=prefix_cache_hit_rate,
            source=trace.source,
            description=f"{len(pairs)} requests resampled as (prompt, output) pairs",
            pairs=pairs,
            block_hashes=trace.hash_ids,
        )

    @classmethod
    def mixture(cls, name: str, parts: Sequence[tuple[float, Workload]], source: str = "") -> Workload:
        """Each request comes from workload i with probability w_i; its pair stays within that workload.

        The marginals are :class:`Mixture` distributions and the hit rate is the prompt-token
        weighted mean sum_i w_i E[P_i] h_i / sum_i w_i E[P_i].
        """
        if not parts:
            raise InputError("parts", parts, "at least one (weight, Workload) pair")
        w = np.array([float(p[0]) for p in parts])
        if np.any(w < 0) or w.sum() <= 0:
            raise InputError("parts", [p[0] for p in parts], "weights >= 0 with a positive sum")
        w = w / w.sum()
        wls = [p[1] for p in parts]
        tok = np.array([wl.mean_prompt_tokens for wl in wls]) * w
        hit = float(np.sum(tok * np.array([wl.prefix_cache_hit_rate for wl in wls])) / tok.sum())
        held = float(np.sum(tok * np.array([wl.decode_prefix_hit_rate for wl in wls])) / tok.sum())
        return cls(
            name=name,
            prompt_tokens=Mixture(tuple(w), tuple(wl.prompt_tokens for wl in wls)),
            output_tokens=Mixture(tuple(w), tuple(wl.output_tokens for wl in wls)),
            prefix_cache_hit_rate=hit,
            decode_prefix_hit_rate=held,
            source=source or " + ".join(f"{wi:.0%} {wl.name}" for wi, wl in zip(w, wls, strict=True)),
            parts=tuple((float(wi), wl) for wi, wl in zip(w, wls, strict=True)),
        )


# --------------------------------------------------------------------------------------------
# presets

_AZURE = (
    "Azure LLM inference trace 2023 ({kind}), Azure Public Dataset; Patel et al., 'Splitwise: "
    "Efficient generative LLM inference using phase splitting', ISCA 2024, sec. 3. Quantile knots "
    "computed by pdplan from AzureLLMInferenceTrace_{kind}.csv (see docs/workloads.md)."
)
_P = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0)

# Quantiles (tokens) of the Azure 2023 traces at the probabilities _P (numpy 'linear' quantiles,
# 19,366 conv and 8,819 code requests). These summary numbers are not the traces themselves.
_CHAT_PROMPT = (
    2,
    29,
    181,
    207,
    387,
    403,
    703,
    1020,
    1071,
    1130,
    1315,
    2734.5,
    4083,
    4098,
    4142,
    4831,
    6179.15,
    14050,
)
_CHAT_OUTPUT = (7, 16, 41, 54, 77, 91, 103, 129, 177, 384, 400, 424, 451, 540, 601, 643.17, 954, 1000)
_CODE_PROMPT = (
    3,
    17,
    75,
    147,
    385.6,
    770,
    1075,
    1469,
    1909,
    2433,
    3192.4,
    5187.6,
    7303.3,
    7436,
    7436,
    7436,
    7437,
    7437,
)
_CODE_OUTPUT = (6, 6, 6, 7, 8, 9, 11, 13, 16, 20, 29, 55, 90, 170.92, 251.46, 359.38, 825.27, 1899)


def _chat() -> Workload:
    return Workload(
        "chat",
        QuantileTable(_P, _CHAT_PROMPT),
        QuantileTable(_P, _CHAT_OUTPUT),
        source=_AZURE.format(kind="conv"),
        description="conversation service; prompt and output drawn independently (trace correlation -0.11)",
        published=PublishedStats(1155, 1020, 2734, 211, 129, 424, "Azure LLM inference trace 2023, conv"),
    )


def _code() -> Workload:
    return Workload(
        "code",
        QuantileTable(_P, _CODE_PROMPT),
        QuantileTable(_P, _CODE_OUTPUT),
        source=_AZURE.format(kind="code"),
        description="code completion: long prompts, very short outputs",
        published=PublishedStats(2048, 1469, 5188, 28, 13, 55, "Azure LLM inference trace 2023, code"),
    )


def _summarization() -> Workload:
    return Workload(
        "summarization",
        LogNormal.fit(2730, 3702),
        LogNormal.fit(167, 372),
        source=(
            "arXiv summarization (Cohan et al., NAACL 2018) statistics as given in pdplan issue #4; "
            "lognormal fitted to median and p90. The fitted means (2808, 203) differ from the published "
            "means (2588, 291): see docs/workloads.md"
        ),
        description="long documents in, a paragraph out",
        published=PublishedStats(2588, 2730, 3702, 291, 167, 372, "issue #4 (arXiv summarization)"),
    )


def _rag() -> Workload:
    return Workload(
        "rag",
        Uniform(8192, 32768),
        LogNormal.fit(128, 384, max_tokens=1024),
        source=(
            "assumption (no published trace): retrieval-augmented prompts uniform on 8k-32k tokens as "
            "issue #4 specifies; short answers lognormal, median 128, p90 384, capped at 1024"
        ),
        description="long-context retrieval-augmented generation, short answers",
    )


def _short() -> Workload:
    return Workload(
        "short",
        LogNormal.fit(64, 180, max_tokens=256),
        QuantileTable(_P, _CHAT_OUTPUT),
        source=(
            "assumption: prompts <= 256 tokens (lognormal median 64, p90 180, capped at 256); "
            "outputs as the Azure 2023 conversation trace"
        ),
        description="short prompts (<= 256 tokens), chat-like answers",
    )


def _mixed() -> Workload:
    return Workload.mixture(
        "mixed", [(0.8, _chat()), (0.2, _rag())], source="80% chat + 20% rag (assumption)"
    )


_LMSYS = (
    "LMSYS-Chat-1M (Zheng et al., 'LMSYS-Chat-1M: a large-scale real-world LLM conversation dataset', "
    "ICLR 2024, Table 1): 2.0 turns per conversation, 69.5 tokens per user prompt, 214.5 per response"
)


def _session_preset(name: str, shape: SessionShape, description: str) -> Workload:
    """A session workload: (prompt, output) pairs of every turn of a seeded sample of sessions, with
    the hit rates its structure implies (model.workload.sessions.implied_hit_rates)."""
    rows = [
        pair[:2]
        for sess in session_rows(shape, IMPLIED_SAMPLE_SESSIONS, np.random.default_rng(0))
        for pair in sess
    ]
    pairs = np.array(rows, dtype=np.int64)
    h = implied_hit_rates(shape)
    return Workload(
        name,
        Empirical(pairs[:, 0]),
        Empirical(pairs[:, 1]),
        prefix_cache_hit_rate=h.colocated,
        source=shape.source,
        description=description,
        pairs=pairs,
        decode_prefix_hit_rate=h.decode,
        prefill_pool_hit_rate=h.prefill_pool,
        sessions=shape,
    )


@functools.cache
def _multiturn_chat() -> Workload:
    shape = SessionShape(
        system_tokens=512,
        first_message_tokens=LogNormal.from_mean_scv(69.5, 4.0, max_tokens=8192),
        message_tokens=LogNormal.from_mean_scv(69.5, 4.0, max_tokens=8192),
        output_tokens=LogNormal.from_mean_scv(214.5, 1.0, max_tokens=4096),
        turns_mean=2.0,
        think_time_s=30.0,
        source=_LMSYS + "; assumptions: a 512-token system prompt shared by every conversation, "
        "lognormal lengths (SCV 4 for prompts, 1 for responses), 30 s mean think time between turns",
    )
    return _session_preset(
        "multiturn-chat", shape, "multi-turn chat: each turn resends the conversation so far"
    )


@functools.cache
def _agentic() -> Workload:
    shape = SessionShape(
        system_tokens=4096,
        first_message_tokens=LogNormal.from_mean_scv(400.0, 1.0, max_tokens=8192),
        message_tokens=LogNormal.from_mean_scv(600.0, 2.0, max_tokens=16384),
        output_tokens=LogNormal.from_mean_scv(150.0, 1.0, max_tokens=2048),
        turns_mean=20.0,
        think_time_s=2.0,
        max_context_tokens=65536,
        source=(
            "assumption, shaped after tool-using coding agents (SWE-agent, Yang et al. NeurIPS 2024: "
            "a system prompt with tool documentation, then tens of action/observation steps): 4096-token "
            "system prompt and tool schema shared by every session, 20 steps on average, tool outputs of "
            "600 tokens and actions of 150 tokens on average, 2 s of tool execution between steps, "
            "sessions end at 64k tokens of context"
        ),
    )
    return _session_preset("agentic", shape, "agent tool loop: long shared tool prompt, many short steps")


_PRESETS = {
    "chat": _chat,
    "code": _code,
    "summarization": _summarization,
    "rag": _rag,
    "short": _short,
    "mixed": _mixed,
    "multiturn-chat": _multiturn_chat,
    "agentic": _agentic,
}


def list_workloads() -> list[str]:
    """Names of the built-in workload presets."""
    return list(_PRESETS)


def get_workload(name: str) -> Workload:
    """A built-in preset by name (case-insensitive); raises UnknownNameError with close names. The
    same (frozen) object each time, so scenarios built from one preset share their cost tables
    (model.serving.phase_tables.table_scenario)."""
    if not isinstance(name, str) or name.strip().lower() not in _PRESETS:
        raise UnknownNameError("workload", str(name), list(_PRESETS))
    return _preset(name.strip().lower())


@functools.cache
def _preset(name: str) -> Workload:
    return _PRESETS[name]()
