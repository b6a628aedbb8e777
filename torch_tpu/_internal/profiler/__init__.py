"""TorchTPU's profiler names: `TpuProfilerConfig` and the rest of its `torch_tpu._internal.profiler` API
(`profile`, `ProfilerActivity`, `xprof_trace_handler`, `register_kineto_backend`, `start_server`, `stop_server`),
implemented over `torch.profiler`; see each module for what differs from TorchTPU.

`torch.tpu.profiler` serves this `__all__`, so it shows all seven names where TorchTPU's shows only
`TpuProfilerConfig`."""

from __future__ import annotations

from torch_tpu._internal.profiler._api import ProfilerActivity, profile, register_kineto_backend, xprof_trace_handler
from torch_tpu._internal.profiler._server import start_server, stop_server
from torch_tpu._internal.profiler.profiler_config import TpuProfilerConfig

__all__ = [
    "ProfilerActivity",
    "TpuProfilerConfig",
    "profile",
    "register_kineto_backend",
    "start_server",
    "stop_server",
    "xprof_trace_handler",
]
