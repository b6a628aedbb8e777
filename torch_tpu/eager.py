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

from typing import Any

from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from torch_tpu import _C
from torch_tpu.config import EAGER_MODES


class ModeSwitch:
    """What `set_eager_mode` returns: the mode is set already; used with `with`, the block's end restores the mode
    that was set before (TorchTPU's `set_eager_mode` is such a context manager, torch_tpu's was a plain setter: both
    uses work)."""

    def __init__(self, mode: str) -> None:
        if mode not in EAGER_MODES:
            raise ValueError(f"eager mode must be one of {', '.join(EAGER_MODES)}, not {mode!r}")
        self.previous = get_eager_mode()
        self.mode = mode
        _C._set_eager_mode(mode)

    def __enter__(self) -> ModeSwitch:
        return self

    def __exit__(self, *exc: object) -> None:
        _C._set_eager_mode(self.previous)

    def __repr__(self) -> str:
        return f"ModeSwitch({self.mode!r}, previous={self.previous!r})"


def set_eager_mode(mode: str) -> ModeSwitch:
    """Switches every device to `mode` (``debug``, ``strict`` or ``fused``) now, running what was recorded first;
    `with set_eager_mode(...)` restores the previous mode at the end of the block."""
    return ModeSwitch(mode)


def get_eager_mode() -> str:
    return str(_C._get_eager_mode())


def eager_mode(mode: str) -> ModeSwitch:
    """`with torch_tpu.eager_mode("strict"): ...` runs the block in `mode`, then restores the previous mode (the
    same object as set_eager_mode's)."""
    return ModeSwitch(mode)


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
