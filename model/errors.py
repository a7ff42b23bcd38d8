"""Error types raised at pdplan's edges (profile files, CLI, UI, Python API).

Every error names the offending field and, where it helps, the allowed range or unit, so a
front end can show ``str(err)`` as a one-line message without a traceback.
"""

from __future__ import annotations

MAX_ECHO_CHARS = 80
"""Longest piece of user input echoed back in an error message."""


def short(value: object, limit: int = MAX_ECHO_CHARS) -> object:
    """``value`` itself if its repr is short, else text whose repr is at most ~``limit`` characters.

    The one helper every error message uses to echo input, so a 5,000-character flag, a string
    of control characters (whose repr is four times longer) or a 5,000-digit integer (whose repr
    Python 3.11+ refuses) never floods a terminal or a log.
    """
    text = value if isinstance(value, str) else None
    if text is None:
        try:
            text = repr(value)
        except (ValueError, OverflowError, RecursionError):
            return f"<{type(value).__name__}>"
        if len(text) <= limit:
            return value
    if len(text) <= limit and len(repr(text)) <= limit + 2:
        return text
    kept, width = [], 0
    for ch in text:
        width += len(repr(ch)) - 2
        if width > limit:
            break
        kept.append(ch)
    return "".join(kept) + "..."


class PdplanError(ValueError):
    """Base class for every error pdplan raises on bad input; its text is always one line."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


class ProfileError(PdplanError):
    """A hardware profile or model-architecture file is malformed.

    The message names the file and the field, e.g.
    ``h100.toml: memory.bandwidth: expected a bandwidth such as '3.35 TB/s', got '989 TFLOPS'``.
    """

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: {field}: {problem}")


class UnknownNameError(PdplanError):
    """A GPU, link, node, model or workload name that is not in the catalog; suggests close names."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        import difflib

        self.kind = kind
        self.name = name
        close = difflib.get_close_matches(
            str(name)[:MAX_ECHO_CHARS].lower(), [k.lower() for k in known], n=3, cutoff=0.4
        )
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(sorted(known)[:40])
        super().__init__(f"unknown {kind} {short(name)!r}{hint} (known: {shown})")


class InputError(PdplanError):
    """A user-supplied value is out of range: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: got {short(value)!r}; allowed: {allowed}")


class UnstableError(PdplanError):
    """A queue with utilisation >= 1 was asked for a finite (scalar) answer."""


def check_whole(field: str, value: object, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int when it is a whole number (not a bool) in [minimum, maximum], else an
    InputError naming ``field`` and the allowed range. The one whole-number check of the package."""
    import numbers

    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum
    if not ok:
        allowed = (
            f"a whole number >= {minimum}" if maximum is None else f"a whole number in [{minimum}, {maximum}]"
        )
        raise InputError(field, value, allowed)
    return int(value)  # type: ignore[arg-type]


def build_request(cls: type, first: object, second: object, kwargs: dict[str, object]) -> object:
    """A request dataclass ``cls`` as given (``first`` an instance, nothing else), or built from its
    two leading fields and keyword fields; an unknown keyword or a missing required field is an
    InputError naming it and the allowed fields (never a TypeError). One function serves every
    public call that takes a request dataclass (model.plan, model.estimate)."""
    from dataclasses import MISSING, fields

    if isinstance(first, cls):
        if second is not None or kwargs:
            raise InputError(cls.__name__, "a request and more arguments", f"a {cls.__name__} alone")
        return first
    names = [f.name for f in fields(cls)]
    allowed = f"a keyword of {cls.__name__}: " + ", ".join(names[2:])
    unknown = sorted(set(kwargs) - set(names[2:]))
    if unknown:
        raise InputError(unknown[0], short(kwargs[unknown[0]]), allowed)
    missing = [
        f.name
        for f in fields(cls)[2:]
        if f.default is MISSING and f.default_factory is MISSING and f.name not in kwargs
    ]
    if missing:
        raise InputError(missing[0], None, f"a value (required by {cls.__name__})")
    return cls(first, second, **kwargs)
