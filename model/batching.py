"""Continuous-batching decode pool: steady-state batch, TPOT and the admission queue at the KV cap.

Model (per decode instance, vectorised over arrays of arrival rates and mean output lengths)
--------------------------------------------------------------------------------------------
An instance runs iteration-level (continuous) batching (Yu et al., "Orca", OSDI 2022, sec. 3.2):
every step emits one token for each of the B sequences in the batch and takes ``step_time_s(B)``
seconds, nondecreasing in B (more KV to read, more rows in each GEMM). A request needing L output
tokens therefore stays L * s(B) seconds. Little's law (Little 1961, Oper. Res. 9(3)) on the batch,
with arrival rate lambda, gives the fluid fixed point

    B = lambda * L * s(B)      equivalently      B / s(B) = lambda * L,

i.e. the instance's token throughput at batch B matches the demanded token rate. We take the
least solution B* (the one the batch grows into from empty); TPOT = s(B*).

KV capacity caps the batch at ``max_batch`` sequences (vLLM's PagedAttention admits a sequence
only if its KV blocks fit, Kwon et al. SOSP 2023, sec. 4). The fixed point exists below the cap
iff lambda * L < max_batch / s(max_batch) (for a throughput curve B / s(B) that is nondecreasing up
to the cap, e.g. any affine step time); otherwise the pool is *unstable*: it emits at most
max_batch / s(max_batch) tokens/s and the queue of waiting requests grows without bound.

Admission wait. Treat the ``max_batch`` slots as servers of an M/G/c queue (Kleinrock 1975,
vol. 1, sec. 3.5; approximations from :mod:`model.queueing`): a request waits only when every slot
is taken, and then the batch is exactly at the cap, so a slot frees after L * s(max_batch)
seconds. Hence c = max_batch, E[S] = L * s(max_batch), SCV[S] = SCV of the output length; this is
conservative, since below the cap steps are faster. Its stability condition is the one above.

Assumptions: one step time for the whole batch (decode steps only; prefill interference belongs to
the colocated model); the mean batch stands in for the fluctuating one (Jensen: exact for affine
s(B)); below one sequence (B* < 1, very light load) a real request still runs at batch >= 1, so
TPOT there is at least s(1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from model.errors import InputError
from model.queueing import WaitResult, mgc_wait

__all__ = ["DecodePoolResult", "decode_pool"]

StepTimeFn = Callable[[np.ndarray], np.ndarray]

_GRID_MAX = 4096
_BISECT_STEPS = 60


@dataclass(frozen=True, eq=False)
class DecodePoolResult:
    """Steady state of one continuous-batching decode instance, arrays of a common shape.

    ``batch_size`` is B* (mean sequences in the batch), ``step_time_s`` = s(B*) = TPOT,
    ``tokens_per_s`` the output-token rate served, ``cap_utilisation`` = B* / max_batch,
    ``residence_s`` = L * s(B*) the decode time of a mean request, ``admission`` the wait for a
    free slot (M/G/c on slots). Unstable entries: batch at the cap, infinite admission wait.
    """

    rate_rps: np.ndarray
    mean_output_tokens: np.ndarray
    max_batch: int
    batch_size: np.ndarray
    step_time_s: np.ndarray
    tokens_per_s: np.ndarray
    cap_utilisation: np.ndarray
    residence_s: np.ndarray
    stable: np.ndarray
    admission: WaitResult

    @property
    def tpot_s(self) -> np.ndarray:
        """Time per output token = step time at the steady-state batch."""
        return self.step_time_s


def _call_step(step_time_s: StepTimeFn, b: np.ndarray) -> np.ndarray:
    out = np.asarray(step_time_s(b), dtype=float)
    if out.shape != b.shape:
        out = np.broadcast_to(out, b.shape).astype(float)
    if not np.all(np.isfinite(out)) or np.any(out <= 0):
        bad = ~(np.isfinite(out) & (out > 0))
        raise InputError(
            "step_time_s",
            f"{float(out[bad].flat[0])!r} at batch {float(b[bad].flat[0]):g}",
            "a finite step time > 0 s for every batch size in [0, max_batch]",
        )
    return out


def decode_pool(
    rate_rps: object,
    mean_output_tokens: object,
    step_time_s: StepTimeFn,
    max_batch: int,
    *,
    scv_output_tokens: object = 1.0,
    scv_arrival: object = 1.0,
    method: str = "kimura",
) -> DecodePoolResult:
    """Solve B = rate * L * s(B) per instance, cap it at ``max_batch``, and size the admission queue.

    ``rate_rps`` and ``mean_output_tokens`` broadcast; ``step_time_s`` maps an array of batch
    sizes to step times (vectorised, nondecreasing, > 0). ``scv_output_tokens`` is the SCV of the
    output length (the slot service time's SCV). See the module docstring for the model.
    """
    if not callable(step_time_s):
        raise InputError("step_time_s", step_time_s, "a callable mapping batch-size arrays to seconds")
    if isinstance(max_batch, bool) or not isinstance(max_batch, int | np.integer) or max_batch < 1:
        raise InputError("max_batch", max_batch, "an integer number of concurrent sequences >= 1")
    cap = int(max_batch)
    rate = np.asarray(rate_rps, dtype=float)
    if np.any(~np.isfinite(rate) | (rate < 0)):
        raise InputError(
            "rate_rps", float(rate[~(np.isfinite(rate) & (rate >= 0))].flat[0]), "finite and >= 0"
        )
    out_tok = np.asarray(mean_output_tokens, dtype=float)
    if np.any(~np.isfinite(out_tok) | (out_tok <= 0)):
        raise InputError(
            "mean_output_tokens",
            float(out_tok[~(np.isfinite(out_tok) & (out_tok > 0))].flat[0]),
            "finite and > 0",
        )
    rate, out_tok = np.broadcast_arrays(rate, out_tok)
    demand = rate * out_tok  # tokens/s asked of the instance

    # Throughput curve on a grid 0..cap (integers when cap <= _GRID_MAX).
    grid = np.linspace(0.0, cap, min(cap, _GRID_MAX) + 1)
    s_grid = _call_step(step_time_s, grid)
    if np.any(np.diff(s_grid) < -1e-12 * s_grid[:-1]):
        i = int(np.argmax(np.diff(s_grid) < 0))
        raise InputError(
            "step_time_s",
            f"s({grid[i + 1]:g}) = {s_grid[i + 1]:.6g} < s({grid[i]:g}) = {s_grid[i]:.6g}",
            "nondecreasing in batch size",
        )
    s_cap = float(s_grid[-1])
    thr_cap = cap / s_cap
    stable = demand < thr_cap

    # Least root of h(B) = B - demand * s(B): first grid point where the running max of B/s(B)
    # reaches the demand brackets it; then bisection inside the bracket.
    thr_run = np.maximum.accumulate(grid / s_grid)
    d_ok = np.where(stable, demand, 0.0)
    hi_idx = np.clip(np.searchsorted(thr_run, d_ok, side="left"), 0, grid.size - 1)
    lo = grid[np.maximum(hi_idx - 1, 0)]
    hi = grid[hi_idx]
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        below = mid - d_ok * _call_step(step_time_s, mid) < 0
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    batch = np.where(d_ok == 0, 0.0, hi)
    batch = np.where(stable, batch, float(cap))
    step = _call_step(step_time_s, batch)
    tokens = np.where(stable, demand, thr_cap)

    admission = mgc_wait(
        rate, out_tok * s_cap, scv_output_tokens, cap, scv_arrival=scv_arrival, method=method
    )
    return DecodePoolResult(
        rate_rps=rate,
        mean_output_tokens=out_tok,
        max_batch=cap,
        batch_size=batch,
        step_time_s=step,
        tokens_per_s=tokens,
        cap_utilisation=batch / cap,
        residence_s=out_tok * step,
        stable=stable,
        admission=admission,
    )
