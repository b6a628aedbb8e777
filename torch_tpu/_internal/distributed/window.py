"""TorchTPU's ICI "window" transfer settings (`torch.tpu.distributed.window_num_stripes` and
`window_stripe_chunk_mb`).

In TorchTPU they tune how a peer-to-peer transfer over the chips' ICI links is cut into stripes: at most
`window_num_stripes` concurrent DMA stripes, each carrying at least `window_stripe_chunk_mb` megabytes. torch_tpu's
`tpu_dist` backend stages every collective through host memory and has no such transfers, so here the values are
validated and stored, read back unchanged, and affect nothing. The defaults are torch_tpu's own choice: TorchTPU
keeps its defaults in its native backend, which does not publish them.
"""

from __future__ import annotations

_DEFAULT_NUM_STRIPES = 4
_DEFAULT_STRIPE_CHUNK_MB = 4

_num_stripes = _DEFAULT_NUM_STRIPES
_stripe_chunk_mb = _DEFAULT_STRIPE_CHUNK_MB


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def num_stripes() -> int:
    """The stored maximum number of concurrent DMA stripes (no effect on tpu_dist)."""
    return _num_stripes


def stripe_chunk_mb() -> int:
    """The stored minimum megabytes per DMA stripe (no effect on tpu_dist)."""
    return _stripe_chunk_mb


def set_window_num_stripes(value: int) -> None:
    """Stores the maximum number of concurrent DMA stripes; a positive int (TypeError/ValueError otherwise)."""
    global _num_stripes
    _num_stripes = _positive_int("window_num_stripes", value)


def set_window_stripe_chunk_mb(value: int) -> None:
    """Stores the minimum megabytes per DMA stripe; a positive int (TypeError/ValueError otherwise)."""
    global _stripe_chunk_mb
    _stripe_chunk_mb = _positive_int("window_stripe_chunk_mb", value)
