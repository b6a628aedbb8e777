"""Bounded dynamism (placeholder until implemented)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def try_bucketed(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any] | None:
    return None
