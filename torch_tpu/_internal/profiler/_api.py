"""TorchTPU's `torch_tpu._internal.profiler` context manager, mapped onto `torch.profiler`.

TorchTPU records an XPlane profile through its own XLA profiler backend. torch_tpu has none; its tpu programs are
Kineto device rows (`tpu:<op>`) of an ordinary `torch.profiler.profile` with `ProfilerActivity.PrivateUse1`, and the
trace written is a Chrome trace (`.trace.json`) in the directory layout TorchTPU uses for its XPlane files:
`<dir>/plugins/profile/<timestamp>/<host>[_<worker_rank>].trace.json`.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

import torch.profiler

from torch_tpu import config

__all__ = ["ProfilerActivity", "profile", "register_kineto_backend", "xprof_trace_handler"]

OUTPUT_DIR_ENV = "TORCH_TPU_PROFILER_OUTPUT_DIR"


class ProfilerActivity(enum.Enum):
    """What to trace: host activity (CPU), the tpu device's programs (TPU); GPU is refused, as in TorchTPU."""

    CPU = 1
    TPU = 2
    GPU = 3


_TORCH_ACTIVITY = {
    ProfilerActivity.CPU: torch.profiler.ProfilerActivity.CPU,
    ProfilerActivity.TPU: torch.profiler.ProfilerActivity.PrivateUse1,
}


def xprof_trace_handler(
    dir_name: os.PathLike[str] | str | None = None,
    worker_rank: str | None = None,
) -> Callable[[Any], str]:
    """An `on_trace_ready` for `profile`: names the directory the trace goes to, and the worker rank that suffixes
    its file name. Without `dir_name`, the directory is `$TORCH_TPU_PROFILER_OUTPUT_DIR` (read now); with neither,
    ValueError. (TorchTPU requires `dir_name`.)"""
    if dir_name is None:
        dir_name = config.load().profiler_output_dir
        if not dir_name:
            raise ValueError(f"xprof_trace_handler: give dir_name or set {OUTPUT_DIR_ENV}")
    directory = os.fspath(dir_name)

    def handler(prof: Any) -> str:
        return directory

    handler.worker_rank = worker_rank  # type: ignore[attr-defined]
    return handler


def _trace_path(log_dir: str, worker_rank: str | None) -> str:
    stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S")
    folder = os.path.join(log_dir, "plugins", "profile", stamp)
    base = socket.gethostname() or "localhost"
    if worker_rank is not None:
        base = f"{base}_{worker_rank}"
    path = os.path.join(folder, f"{base}.trace.json")
    n = 1
    while os.path.exists(path):  # two profiles within one second
        path = os.path.join(folder, f"{base}.{n}.trace.json")
        n += 1
    return path


@contextlib.contextmanager
def profile(
    activities: list[ProfilerActivity] | None = None,
    on_trace_ready: Callable[[Any], str] | None = None,
) -> Iterator[torch.profiler.profile]:
    """Profiles the block and writes its Chrome trace where `on_trace_ready` says.

    As in TorchTPU, `on_trace_ready` is required and is called with None before profiling starts; it returns the
    directory (see `xprof_trace_handler`), and an attribute `worker_rank` on it, if any, suffixes the file name.
    `activities` defaults to CPU and TPU. Yields the underlying `torch.profiler.profile` (TorchTPU yields None); once
    the block ends, its `trace_path` attribute is the file written. The trace is written even if the block raises.
    """
    if on_trace_ready is None:
        raise ValueError("profile: on_trace_ready must be given (e.g. xprof_trace_handler(dir_name=...))")
    if activities is None:
        activities = [ProfilerActivity.CPU, ProfilerActivity.TPU]
    if ProfilerActivity.GPU in activities:
        raise ValueError("profile: GPU profiling is not supported")
    log_dir = os.fspath(on_trace_ready(None))
    worker_rank = getattr(on_trace_ready, "worker_rank", None)
    if worker_rank is not None and ("/" in worker_rank or "\\" in worker_rank):
        raise ValueError(f"profile: worker_rank must not contain path separators: {worker_rank!r}")
    prof = torch.profiler.profile(activities=[_TORCH_ACTIVITY[a] for a in dict.fromkeys(activities)])
    try:
        with prof:
            yield prof
    finally:
        path = _trace_path(log_dir, worker_rank)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        prof.export_chrome_trace(path)
        prof.trace_path = path  # type: ignore[attr-defined]


def register_kineto_backend() -> None:
    """No-op kept for TorchTPU's API: torch_tpu hooks its tpu rows into Kineto when it is imported."""
