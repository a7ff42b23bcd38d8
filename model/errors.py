"""Error types raised at pdplan's edges (profile files, CLI, UI, Python API).

Every error names the offending field and, where it helps, the allowed range or unit, so a
front end can show ``str(err)`` as a one-line message without a traceback.
"""

from __future__ import annotations


class PdplanError(ValueError):
    """Base class for every error pdplan raises on bad input."""


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
        close = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(sorted(known)[:40])
        super().__init__(f"unknown {kind} {name!r}{hint} (known: {shown})")


class InputError(PdplanError):
    """A user-supplied value is out of range: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: got {value!r}; allowed: {allowed}")


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
