"""torch_tpu: PyTorch's `tpu` device, every op lowered to StableHLO and run by XLA through a PJRT plugin.

`import torch_tpu` (or just `import torch`, through the torch.backends entry point) makes torch.device("tpu") work.
"""

from __future__ import annotations

from typing import Any


def _autoload() -> None:
    """Hook of the `torch.backends` entry point (run at the end of `import torch`); importing this package is the
    whole job. Defined before `import torch` so the hook resolves when torch_tpu is the module importing torch."""


import torch  # noqa: E402,F401  (loads libtorch before _C)

from torch_tpu import _C, _decomposed, _meta, _registration, config, runtime  # noqa: E402,F401  (_C registers the kernels)
from torch_tpu.eager import eager_mode, flush, get_eager_mode, set_eager_mode  # noqa: E402

__version__ = "0.1.0"

_registration.register()

# torch.autocast("tpu") without a dtype casts to bfloat16, the TPU's native reduced precision (PyTorch's default for
# PrivateUse1 is float16). The setting is per thread: this sets it for the thread importing torch.
torch.set_autocast_dtype("tpu", torch.bfloat16)

from torch_tpu import distributed  # noqa: E402  (registers the tpu_dist c10d backend)

distributed.register()
distributed.select_device()

from torch_tpu import compile as _compile  # noqa: E402  (torch.compile on tpu: backend "tpu", DeviceInterface)

_compile.install()

from torch_tpu import integrations  # noqa: E402  (Accelerate: tpu in its device tables, once it is imported)

integrations.install()

from torch_tpu import _exit  # noqa: E402  (drains the autograd engine's tpu threads before the interpreter finalizes)

_exit.install()


def is_available() -> bool:
    """True when a PJRT plugin loaded and exposes at least one device."""
    return runtime.is_available()


def metrics() -> dict[str, Any]:
    """Runtime counters (compiles, cache hits, executions, transfers, live buffers) and per-op counts: ops lowered
    to programs, ops run on the host by design (random draws, data-dependent shapes) and CPU fallbacks."""
    _C._release_finished()  # buffers finished executions no longer need are not counted as live
    out: dict[str, Any] = dict(_C.runtime_counters())
    out["lowered_ops"] = dict(_C._lowered_counts())
    out["fallback_ops"] = dict(_C._fallback_counts())
    out["host_ops"] = dict(_C._host_op_counts())
    out["host_syncs_by_reason"] = dict(_C._host_sync_counts())
    out.update(_compile.counters.snapshot())
    out["nodes_per_graph"] = out["graph_nodes"] / out["graphs_run"] if out["graphs_run"] else 0.0
    return out


def reset_op_counts() -> None:
    _C._reset_op_counts()
    _C._reset_host_sync_counts()


__all__ = [
    "config",
    "runtime",
    "is_available",
    "metrics",
    "reset_op_counts",
    "set_eager_mode",
    "get_eager_mode",
    "eager_mode",
    "flush",
    "__version__",
]
