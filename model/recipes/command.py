"""One launch command as a value: program, arguments, environment; rendered as a shell line.

Every flag is checked against the engine version's data file when the command is built
(:meth:`model.recipes.catalog.EngineData.check_flags`), so a recipe cannot name a flag the data
file (and so the engine's documentation) does not list.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from model.recipes.catalog import EngineData


@dataclass(frozen=True)
class Command:
    """``program`` (words, e.g. ``"vllm serve"``), positional arguments, then ``(flag, values)``
    options (a flag with no values is a switch); ``env`` is set for this command only."""

    program: str
    positional: tuple[str, ...] = ()
    options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        """The flags in order of appearance."""
        return tuple(flag for flag, _ in self.options)

    def argv(self) -> list[str]:
        """The argument vector (environment not included)."""
        out = [*self.program.split(), *self.positional]
        for flag, values in self.options:
            out += [flag, *values]
        return out

    def shell(self, background: bool = False) -> str:
        """One shell command, one option per continued line: ``ENV=.. prog arg \\`` ... ``&``."""
        head = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.env), *self.program.split()])
        head = " ".join([head, *(shlex.quote(p) for p in self.positional)])
        lines = [head] + [
            "  " + " ".join([flag, *(shlex.quote(v) for v in values)]) for flag, values in self.options
        ]
        return " \\\n".join(lines) + (" &" if background else "")


def command(
    data: EngineData,
    program: str,
    positional: tuple[str, ...] = (),
    options: list[tuple[str, object]] | tuple[tuple[str, object], ...] = (),
    env: tuple[tuple[str, str], ...] = (),
) -> Command:
    """A Command whose flags are all in ``data`` for ``program``. An option value may be None (a
    switch), one value, or a list/tuple of values; values become strings."""
    opts: list[tuple[str, tuple[str, ...]]] = []
    for flag, value in options:
        if value is None:
            vals: tuple[str, ...] = ()
        elif isinstance(value, list | tuple):
            vals = tuple(str(v) for v in value)
        else:
            vals = (str(value),)
        opts.append((flag, vals))
    cmd = Command(program, tuple(positional), tuple(opts), tuple(env))
    data.check_flags(program, cmd.flags)
    return cmd
