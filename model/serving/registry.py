"""The serving-style registry: every style the planner, simulator, CLI, reports and app know.

Following Vidur's registries (one name per extension, a registry maps it to its implementation), a
new style is one module implementing model.serving.style.ServingStyle plus one line in BUILT_IN
below, or a ``register(...)`` call from outside the package (tests/test_registry.py registers a
toy style that way and removes it with ``registered(...)``). Iteration order is registration order
(the order of the plan's ``best`` and of the app's panels).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from model.errors import InputError
from model.serving.colocated_style import ColocatedStyle
from model.serving.disaggregated_style import DisaggregatedStyle
from model.serving.style import FAMILIES, CandidateSet, ServingStyle
from model.workload.scenario import Scenario

_STYLES: dict[str, ServingStyle] = {}

_REQUIRED = (
    "name",
    "config_type",
    "family",
    "title",
    "tie_order",
    "cli_flags",
    "budget_configs",
    "target_groups",
    "build_set",
    "lose_one",
    "in_flight",
    "sim_layout",
    "config_from_cli",
    "config_dict",
    "phase_deployments",
    "kv_link",
)


def register(style: ServingStyle) -> ServingStyle:
    """Add ``style`` under ``style.name`` (a name may be registered once); returns it."""
    missing = [a for a in _REQUIRED if not hasattr(style, a)]
    if missing:
        raise InputError("style", type(style).__name__, f"a ServingStyle (missing {', '.join(missing)})")
    if not isinstance(style.name, str) or not style.name or style.name in _STYLES:
        raise InputError("style.name", style.name, f"a new non-empty name (registered: {', '.join(_STYLES)})")
    if style.family not in FAMILIES:
        raise InputError("style.family", style.family, f"one of {', '.join(FAMILIES)}")
    _STYLES[style.name] = style
    return style


def unregister(name: str) -> None:
    """Remove the style registered as ``name``."""
    if name not in _STYLES:
        raise InputError("style", name, f"a registered style ({', '.join(_STYLES)})")
    del _STYLES[name]


@contextmanager
def registered(style: ServingStyle) -> Iterator[ServingStyle]:
    """Register ``style`` for the duration of a ``with`` block, then remove it."""
    register(style)
    try:
        yield style
    finally:
        _STYLES.pop(style.name, None)


def styles(family: str | None = None) -> list[ServingStyle]:
    """Registered styles in registration order (only those of ``family`` when given)."""
    return [s for s in _STYLES.values() if family is None or s.family == family]


def style_names() -> tuple[str, ...]:
    return tuple(_STYLES)


def get_style(name: str) -> ServingStyle:
    """The style registered as ``name`` (InputError listing the registered names otherwise)."""
    try:
        return _STYLES[name]
    except (KeyError, TypeError):
        raise InputError("style", name, f"one of {', '.join(_STYLES)}") from None


def style_of(config: Any) -> ServingStyle:
    """The style of a configuration (its ``style`` name, checked against the style's config type)."""
    name = getattr(config, "style", None)
    style = _STYLES.get(name) if isinstance(name, str) else None
    if style is None or not isinstance(config, style.config_type):
        kinds = ", ".join(sorted({s.config_type.__name__ for s in _STYLES.values()}))
        raise InputError("config", type(config).__name__, f"a configuration of a registered style ({kinds})")
    return style


def build_set(scenario: Scenario, configs: Sequence[Any]) -> CandidateSet:
    """The candidate set of a list of configurations of one style."""
    if not configs:
        raise InputError("configs", configs, "at least one configuration")
    style = style_of(configs[0])
    if any(style_of(c) is not style for c in configs):
        raise InputError("configs", "mixed styles", "configurations of one style")
    return style.build_set(scenario, configs)


# The built-in styles, in the order plans list them. A new built-in style is one line here.
BUILT_IN: tuple[ServingStyle, ...] = (
    ColocatedStyle(chunked=False),
    ColocatedStyle(chunked=True),
    DisaggregatedStyle(),
)
for _style in BUILT_IN:
    register(_style)
