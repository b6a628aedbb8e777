"""Eager modes: how ops become programs.

- ``debug``: every op runs as its own program and the host waits for it (errors point at the op).
- ``strict``: every op runs as its own program, asynchronously; the host waits only at sync points.
- ``fused`` (DeferAndFuse): ops are recorded into one graph per device that runs at host reads, ``synchronize()``,
  a node limit, when an op must run on the host, or at the start and the end of an optimizer step; dead
  intermediates never reach device memory.

The optimizer step is the training loop's natural boundary: cutting the graph there gives every step the same graphs
(compiled once, then cache hits) however rarely the loop reads the loss, and the step runs while the host records the
next one (a flush does not wait). The cut before the step keeps the parameters' in-place updates out of the program
that still reads the old values in its backward pass: in one program XLA copies every updated parameter first
(33 MB a step for the GPT-2-style benchmark model); the forward/backward program also runs while the host records
the optimizer's ops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from torch_tpu import _C
from torch_tpu.config import EAGER_MODES


def set_eager_mode(mode: str) -> None:
    """Switches every device to `mode` (``debug``, ``strict`` or ``fused``); recorded ops run first."""
    if mode not in EAGER_MODES:
        raise ValueError(f"eager mode must be one of {', '.join(EAGER_MODES)}, not {mode!r}")
    _C._set_eager_mode(mode)


def get_eager_mode() -> str:
    return str(_C._get_eager_mode())


@contextlib.contextmanager
def eager_mode(mode: str) -> Iterator[None]:
    """Runs the block in `mode`, then restores the previous mode (running whatever the block left recorded)."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def flush() -> None:
    """Runs every device's recorded graph now (fused mode); a no-op otherwise. Does not wait for completion."""
    _C._flush()


def set_graph_node_limit(nodes: int) -> None:
    """Ops recorded into a fused graph before it runs on its own (default 4096)."""
    _C._set_graph_node_limit(int(nodes))


def _flush_around_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    if _C._get_eager_mode() == "fused":
        _C._flush()


_step_hooks = (
    register_optimizer_step_pre_hook(_flush_around_optimizer_step),
    register_optimizer_step_post_hook(_flush_around_optimizer_step),
)
