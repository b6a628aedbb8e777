"""TorchTPU's `torch_tpu._internal.compile`: the "tpu" torch.compile backend as a class (`TpuBackend`), its
asynchronous warm-up (`async_compile`, `resolve_compilations`, `AsyncCompilationSubmitted`), `clear_cache` and the
`TpuCompileDebug` record. All of it runs on our backend, `torch_tpu.compile` (backend "tpu"); the options it takes
and what each does here are described in `torch_tpu.compile.options`."""

from __future__ import annotations

from torch_tpu._internal.compile._backend import (
    AsyncCompilationSubmitted,
    TpuBackend,
    TpuCompileDebug,
    async_compile,
    clear_cache,
    resolve_compilations,
)

__all__ = [
    "AsyncCompilationSubmitted",
    "TpuBackend",
    "TpuCompileDebug",
    "async_compile",
    "clear_cache",
    "resolve_compilations",
]
