"""TorchTPU's distributed helpers, served as `torch.tpu.distributed`: `set_tpu_launch_env`, `spmd_safe`,
`topology_aware_mesh`, and the module properties `window_num_stripes` / `window_stripe_chunk_mb` (read here as module
attributes, assigned through `set_window_num_stripes` / `set_window_stripe_chunk_mb`).

These sit beside torch_tpu's own `tpu_dist` backend (torch_tpu/distributed.py), which they use but do not change.
"""

from __future__ import annotations

from typing import Any

from torch_tpu._internal.distributed import window
from torch_tpu._internal.distributed.launch import set_tpu_launch_env
from torch_tpu._internal.distributed.mesh import topology_aware_mesh
from torch_tpu._internal.distributed.spmd import spmd_safe
from torch_tpu._internal.distributed.window import set_window_num_stripes as set_window_num_stripes
from torch_tpu._internal.distributed.window import set_window_stripe_chunk_mb as set_window_stripe_chunk_mb

__all__ = ["set_tpu_launch_env", "spmd_safe", "topology_aware_mesh"]

_WINDOW_SETTINGS = {"window_num_stripes": window.num_stripes, "window_stripe_chunk_mb": window.stripe_chunk_mb}


def __getattr__(name: str) -> Any:
    """The window settings are read live, so a value set through either module shows in both."""
    if name in _WINDOW_SETTINGS:
        return _WINDOW_SETTINGS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
