"""Plain lengths: a Workload from "4000 in / 500 out" or from a short length-distribution spec.

Spec grammar (strict: a regular expression, no evaluation; docs/workloads.md "Plain lengths"):

- ``fixed:N``                      every request has exactly N tokens (a whole number)
- ``lognormal:mean=M,cv=C``        lognormal with mean M tokens and coefficient of variation C
                                   (:meth:`LogNormal.from_mean_scv` with scv = C^2; M and C are those
                                   of the law before clipping to [1, MAX_TOKENS], which raises the
                                   mean only when much mass lies below 1 token)
- ``uniform:low=A,high=B``         continuous uniform on [A, B] tokens, rounded

Numbers are plain decimals with an optional exponent (``4000``, ``4e3``, ``0.5``), finite; token
counts lie in [1, model.limits.MAX_TOKENS]. Keys of a form may come in any order, each once.
"""

from __future__ import annotations

import math
import re

from model.errors import InputError, check_whole, short
from model.limits import MAX_TOKENS
from model.workload.lengths import Fixed, LengthDist, LogNormal, Uniform
from model.workload.presets import Workload

__all__ = [
    "MAX_CV",
    "MAX_SPEC_CHARS",
    "SPEC_FORMS",
    "parse_length_spec",
    "parse_tokens",
    "workload_from_lengths",
]

MAX_SPEC_CHARS = 200
"""Longest spec accepted: the longest valid form is well under 100 characters."""

MAX_CV = 10.0
"""Largest lognormal coefficient of variation: the Azure 2023 traces' length CVs are about 1-2;
C = 10 already puts most requests near 1 token with a few huge ones."""

SPEC_FORMS = "fixed:N, lognormal:mean=M,cv=C or uniform:low=A,high=B"

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SPEC = re.compile(r"(?P<kind>[a-z]+):(?P<body>.*)")
_PAIR = re.compile(r"(?P<key>[a-z]+)=(?P<value>" + _NUMBER + ")")
_KEYS = {"lognormal": ("mean", "cv"), "uniform": ("low", "high")}


def _number(text: str, field: str, allowed: str) -> float:
    """A finite float from text matching the strict number grammar, else InputError."""
    if len(text) > 40 or not re.fullmatch(_NUMBER, text):
        raise InputError(field, text, allowed)
    x = float(text)
    if not math.isfinite(x):
        raise InputError(field, text, allowed + " (a finite number)")
    return x


def _tokens(x: float, text: str, field: str, *, whole: bool) -> float:
    kind = "a whole number" if whole else "a number"
    allowed = f"{kind} of tokens in [1, {MAX_TOKENS}]"
    if not 1 <= x <= MAX_TOKENS or (whole and x != int(x)):
        raise InputError(field, text, allowed)
    return x


def _token_value(values: dict[str, str], key: str, field: str) -> float:
    """The token count ``values[key]`` of a spec (any real number in [1, MAX_TOKENS])."""
    name = f"{field} {key}"
    return _tokens(
        _number(values[key], name, f"a number of tokens in [1, {MAX_TOKENS}]"), values[key], name, whole=False
    )


def parse_tokens(text: str, field: str) -> int:
    """A fixed token count such as ``"4000"``: a whole number in [1, MAX_TOKENS]."""
    allowed = f"a whole number of tokens in [1, {MAX_TOKENS}]"
    if not isinstance(text, str):
        raise InputError(field, short(text), allowed)
    t = text.strip()
    return int(_tokens(_number(t, field, allowed), t, field, whole=True))


def parse_length_spec(spec: str, field: str) -> LengthDist:
    """The length distribution a spec names (grammar in the module docstring); InputError naming
    ``field`` and the allowed forms otherwise."""
    if not isinstance(spec, str):
        raise InputError(field, short(spec), SPEC_FORMS)
    text = spec.strip()
    if len(text) > MAX_SPEC_CHARS:
        raise InputError(field, text, f"at most {MAX_SPEC_CHARS} characters: {SPEC_FORMS}")
    m = _SPEC.fullmatch(text.lower())
    if m is None or m["kind"] not in ("fixed", *_KEYS):
        raise InputError(field, text, SPEC_FORMS)
    kind, body = m["kind"], m["body"]
    if kind == "fixed":
        return Fixed(parse_tokens(body, field))
    keys = _KEYS[kind]
    form = f"{kind}:" + ",".join(f"{k}=..." for k in keys)
    values: dict[str, str] = {}
    for part in body.split(","):
        pm = _PAIR.fullmatch(part.strip())
        if pm is None or pm["key"] not in keys or pm["key"] in values:
            raise InputError(field, text, f"{form} with each key once and plain numbers ({SPEC_FORMS})")
        values[pm["key"]] = pm["value"]
    if set(values) != set(keys):
        raise InputError(field, text, f"{form} (missing {', '.join(k for k in keys if k not in values)})")
    if kind == "lognormal":
        mean = _token_value(values, "mean", field)
        cv_allowed = f"a coefficient of variation in (0, {MAX_CV:g}] (use fixed:N for no spread)"
        cv = _number(values["cv"], f"{field} cv", cv_allowed)
        if not 0 < cv <= MAX_CV:
            raise InputError(f"{field} cv", values["cv"], cv_allowed)
        return LogNormal.from_mean_scv(mean, cv * cv, max_tokens=float(MAX_TOKENS))
    low, high = _token_value(values, "low", field), _token_value(values, "high", field)
    if not high > low:
        raise InputError(f"{field} high", values["high"], f"a number of tokens > low ({low:g})")
    return Uniform(low, high)


def length_spec(text: str, field: str) -> str:
    """A length given as a plain token count ("4000") or a spec ("lognormal:mean=2000,cv=1"),
    validated and normalised to a spec ("fixed:4000"): the form the app and scenario files use."""
    if not isinstance(text, str):
        raise InputError(field, short(text), "a token count such as 4000, or " + SPEC_FORMS)
    t = text.strip().lower()
    spec = f"fixed:{t}" if t.isdigit() else t
    parse_length_spec(spec, field)
    return spec


def _side(fixed: int | None, dist: str | LengthDist | None, name: str) -> tuple[LengthDist, str]:
    """One side (prompt or output) from exactly one of a fixed count and a distribution."""
    if (fixed is None) == (dist is None):
        raise InputError(name, None, f"exactly one of {name} (a token count) and {name}_dist (a spec)")
    if fixed is not None:
        n = check_whole(name, fixed, 1, MAX_TOKENS)
        return Fixed(n), str(n)
    if isinstance(dist, LengthDist):
        return dist, type(dist).__name__
    return parse_length_spec(dist, f"{name}_dist"), str(dist).strip().lower()


def workload_from_lengths(
    isl: int | None = None,
    osl: int | None = None,
    *,
    isl_dist: str | LengthDist | None = None,
    osl_dist: str | LengthDist | None = None,
    prefix_cache_hit_rate: float = 0.0,
    name: str | None = None,
) -> Workload:
    """A Workload from plain input/output sequence lengths: a fixed count or a distribution spec each.

    ``workload_from_lengths(isl=4000, osl=500)`` gives every request 4000 prompt and 500 output
    tokens; ``isl_dist="lognormal:mean=2000,cv=1"`` draws prompts from that law instead. Prompt and
    output lengths are drawn independently. ``name`` defaults to ``isl=...; osl=...``.
    """
    prompt, p_text = _side(isl, isl_dist, "isl")
    output, o_text = _side(osl, osl_dist, "osl")
    return Workload(
        name=name or f"isl={p_text}; osl={o_text}",
        prompt_tokens=prompt,
        output_tokens=output,
        prefix_cache_hit_rate=prefix_cache_hit_rate,
        source="user-given lengths",
        description="plain input/output lengths; prompt and output drawn independently",
    )
