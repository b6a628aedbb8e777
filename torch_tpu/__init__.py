"""torch_tpu: PyTorch's `tpu` device, every op lowered to StableHLO and run by XLA through a PJRT plugin."""

from __future__ import annotations

from typing import Any

from torch_tpu import config, runtime

__version__ = "0.1.0"


def is_available() -> bool:
    """True when a PJRT plugin loaded and exposes at least one device."""
    return runtime.is_available()


def metrics() -> dict[str, Any]:
    """Counters of the runtime: compiles, cache hits, executions, host transfers, live buffers."""
    from torch_tpu import _C

    return dict(_C.runtime_counters())


__all__ = ["config", "runtime", "is_available", "metrics", "__version__"]
