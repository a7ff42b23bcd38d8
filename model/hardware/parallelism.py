"""The parallelism of one model instance as one frozen value: TP, PP, EP, attention-DP, nodes.

One value travels through physics (step costs, memory), collectives, the serving styles, the
planner and the simulator instead of bare ``tp`` integers (issue 12). Degrees follow the engines'
own flags so a plan maps onto a launch command:

- ``tp``: tensor parallelism (Megatron-LM, Shoeybi et al. 2019): every linear layer split over
  ``tp`` GPUs, two all-reduces per transformer layer (vLLM/SGLang ``--tensor-parallel-size``).
- ``pp``: pipeline parallelism (GPipe, Huang et al. 2019): layers split into ``pp`` stages
  (``--pipeline-parallel-size``).
- ``dp_attention``: attention data parallelism (SGLang ``--enable-dp-attention --dp N``; vLLM
  ``--data-parallel-size`` with MoE): ``dp_attention`` attention replicas, each a TP group of
  ``tp`` GPUs with its own KV cache, feeding shared MoE layers (DeepSeek-V3 tech. report, sec. 3.4).
- ``ep``: expert parallelism (GShard, Lepikhin et al. 2021): the routed experts split over ``ep``
  GPUs of the instance (vLLM ``--enable-expert-parallel`` sets EP = TP x DP). EP cannot exceed the
  GPUs of one pipeline stage (``tp x dp_attention``) and must divide them.
- ``nodes``: how many nodes the instance spans; its GPUs split evenly over them.

GPUs per instance = ``tp x pp x dp_attention`` (EP reuses the same GPUs). Rank order inside the
instance: TP innermost, then attention-DP, then PP (SGLang and vLLM's rank layout), so a TP group
and an EP group occupy consecutive GPUs and PP stages the outermost blocks.

The physics (model.physics.steps, model.physics.expert_parallel) models all four degrees; the
engines' layout names: "TP8" (tp=8), "TEP8" (tp=8, ep=8: experts split over the TP group, all-to-all
instead of all-reduce in the MoE layers), "DEP16" (dp_attention=16, ep=16, tp=1).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from model.errors import InputError

MAX_DEGREE = 4096
"""Largest degree of any one kind: beyond any deployed system (GB200 NVL72 racks span 72 GPUs)."""


def _degree(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_DEGREE:
        raise InputError(field, value, f"a whole number in [1, {MAX_DEGREE}]")
    return int(value)


@dataclass(frozen=True)
class Parallelism:
    """Parallel degrees of one model instance (see the module docstring for each)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp_attention: int = 1
    nodes: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "dp_attention", "nodes"):
            object.__setattr__(self, name, _degree(f"parallelism.{name}", getattr(self, name)))
        stage = self.tp * self.dp_attention
        if self.ep > stage or stage % self.ep:
            raise InputError(
                "parallelism.ep", self.ep, f"a divisor of tp x dp_attention = {stage} (EP reuses those GPUs)"
            )
        if self.gpus % self.nodes:
            raise InputError(
                "parallelism.nodes", self.nodes, f"a divisor of the instance's {self.gpus} GPUs (even split)"
            )

    @property
    def gpus(self) -> int:
        """GPUs of one instance: tp x pp x dp_attention."""
        return self.tp * self.pp * self.dp_attention

    @property
    def gpus_per_node(self) -> int:
        """GPUs of the instance in each node it spans."""
        return self.gpus // self.nodes

    @property
    def label(self) -> str:
        """Short human label in the engines' vocabulary, e.g. ``TP4``, ``TP2 PP2``, ``DEP8``."""
        parts = []
        if self.dp_attention > 1 and self.ep == self.tp * self.dp_attention and self.tp == 1:
            parts.append(f"DEP{self.ep}")
        elif self.dp_attention == 1 and self.ep == self.tp > 1:
            parts.append(f"TEP{self.tp}")
        else:
            if self.dp_attention > 1:
                parts.append(f"DP{self.dp_attention}")
            parts.append(f"TP{self.tp}")
            if self.ep > 1:
                parts.append(f"EP{self.ep}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.nodes > 1:
            parts.append(f"x{self.nodes} nodes")
        return " ".join(parts)

    @property
    def stage_gpus(self) -> int:
        """GPUs of one pipeline stage: tp x dp_attention (the GPUs the routed experts split over)."""
        return self.tp * self.dp_attention

    def as_dict(self) -> dict[str, int]:
        """Plain dict for JSON output."""
        return {
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "dp_attention": self.dp_attention,
            "nodes": self.nodes,
        }

    @classmethod
    def tensor(cls, tp: int) -> Parallelism:
        """TP-only instance (the common case): ``Parallelism.tensor(4)``."""
        return cls(tp=tp)


def as_parallelism(field: str, value: object) -> Parallelism:
    """``value`` as a Parallelism: a Parallelism as is, a whole number as a TP-only instance of that
    degree (the common case, and the form older calls use). Errors name ``field``."""
    if isinstance(value, Parallelism):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_DEGREE:
        raise InputError(field, value, f"a Parallelism or a whole number (TP degree) in [1, {MAX_DEGREE}]")
    return Parallelism.tensor(int(value))


_LAYOUT_KEYS = {"tp": "tp", "pp": "pp", "ep": "ep", "dp": "dp_attention", "dp_attention": "dp_attention"}


def parse_parallelism(field: str, text: str, *, nodes: int = 1) -> Parallelism:
    """A layout from its engine-style text: ``"tp=8"``, ``"tep=8"`` (tp=8, ep=8), ``"dep=32"``
    (dp_attention=32, ep=32), or comma-separated degrees ``"tp=2,dp=4,ep=8,pp=2"``. ``nodes``: nodes
    the instance spans. Errors name ``field`` and show the grammar; nothing is evaluated."""
    allowed = 'e.g. "tp=8", "tep=8", "dep=32" or "tp=2,dp=4,ep=8,pp=1"'
    if not isinstance(text, str) or not text.strip() or len(text) > 100:
        raise InputError(field, text, allowed)
    degrees: dict[str, int] = {}
    for part in text.lower().replace(" ", "").split(","):
        key, sep, value = part.partition("=")
        if not sep or not value.isdigit() or len(value) > 5:
            raise InputError(field, text, allowed)
        n = int(value)
        if key == "tep":
            degrees.update(tp=n, ep=n)
        elif key == "dep":
            degrees.update(dp_attention=n, ep=n)
        elif key in _LAYOUT_KEYS:
            degrees[_LAYOUT_KEYS[key]] = n
        else:
            raise InputError(field, text, allowed)
    try:
        return Parallelism(**degrees, nodes=nodes)
    except InputError as err:
        raise InputError(field, text, f"{allowed}; {err.allowed}") from None
