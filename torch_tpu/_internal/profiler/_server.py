"""TorchTPU's xprof profiler server (`start_server` / `stop_server`), which TensorBoard connects to for on-demand
captures. torch_tpu has no xprof server: both raise RuntimeError. Use `profile` or `torch.profiler` instead."""

from __future__ import annotations

from typing import NoReturn

__all__ = ["start_server", "stop_server"]


def _platform() -> str:
    from torch_tpu._internal.ops.sparse_core import platform_name

    return platform_name()


def start_server(port: int) -> NoReturn:
    """Would start an xprof server on `port`; raises RuntimeError: not available on this platform."""
    raise RuntimeError(
        f"start_server: the xprof profiler server is not available on this platform ({_platform()}); record traces "
        "with torch_tpu._internal.profiler.profile or torch.profiler.profile instead"
    )


def stop_server() -> NoReturn:
    """Would stop the xprof server; raises RuntimeError: not available on this platform (no server can run)."""
    raise RuntimeError(f"stop_server: the xprof profiler server is not available on this platform ({_platform()})")
