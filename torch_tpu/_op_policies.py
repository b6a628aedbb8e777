"""Per-device choices PyTorch makes in Python for known device types, made for `tpu` the way CPU's are.

torch.nn.functional.linear_cross_entropy resolves its "auto" accumulation policy from a table keyed by device type;
an unlisted device gets the low-precision "compact" policy with no float32 accumulation, so bfloat16 losses on tpu
would differ from CPU's (and CUDA's) by the rounding of every intermediate. `tpu` takes CPU's entries: float32
accumulation and the "accurate" policy, which gives CPU's numbers.

torch.nn.attention.flex_attention refuses devices outside a fixed set (cuda, cpu, xpu, hpu, mps) before it runs, in
eager and while torch.compile traces it (TorchTitan's Llama attention is compiled FlexAttention). On tpu both of its
paths work as they are: eager runs the dense reference (scores materialised, score_mod/mask_mod through vmap) and
compiled goes through AOTAutograd into torch_tpu's backend, forward and backward. The check lets tpu through; the
other devices keep torch's own checks (CPU still refuses backward, as in torch).
"""

from __future__ import annotations

from typing import Any

import torch


def _linear_cross_entropy() -> None:
    try:
        from torch.nn.modules import linear_cross_entropy_options as lce
    except ImportError:  # a torch without the chunked linear_cross_entropy
        return
    table = getattr(lce, "_AUTO_DEFAULTS", None)
    options = getattr(lce, "LinearCrossEntropyOptions", None)
    resolve = getattr(options, "_resolve_auto_acc_dtype", None)
    if not isinstance(table, dict) or resolve is None or getattr(resolve, "_torch_tpu", False):
        return
    for dtype in (torch.bfloat16, torch.float16):
        if ("cpu", dtype) in table:
            table.setdefault(("tpu", dtype), table[("cpu", dtype)])

    def resolve_with_tpu(dtype: torch.dtype, device: torch.device | None) -> Any:
        if device is not None and device.type == "tpu":
            return resolve(dtype, torch.device("cpu"))
        return resolve(dtype, device)

    resolve_with_tpu._torch_tpu = True  # type: ignore[attr-defined]
    options._resolve_auto_acc_dtype = staticmethod(resolve_with_tpu)


def allow_flex_attention(device_type: str) -> None:
    """FlexAttention skips its device check for `device_type` (idempotent); other devices keep torch's checks."""
    try:
        from torch.nn.attention import flex_attention as fa
    except ImportError:
        return
    validate = getattr(fa, "_validate_device", None)
    if validate is None or getattr(validate, "_torch_tpu", False):
        return

    def validate_except(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        if query.device.type != device_type:
            validate(query, key, value)

    validate_except._torch_tpu = True  # type: ignore[attr-defined]
    fa._validate_device = validate_except


def install() -> None:
    """Idempotent."""
    _linear_cross_entropy()
    allow_flex_attention("tpu")
