"""Int8 weight-only quantization for tpu.

`Int8WeightOnlyLinear.from_float(linear)` quantizes a Linear's weight per output channel (symmetric qint8, as
`torch.quantize_per_channel` does on tpu) and runs `torch.ops.torch_tpu.int8_weight_only_linear`: the int8 weight is
dequantized inside the matmul's program, so only the int8 weight (a quarter of the float32 bytes) stays on the device.
Inference only (no gradients flow to the int8 weight).
"""

from __future__ import annotations

import torch
from torch import nn


class Int8WeightOnlyLinear(nn.Module):
    def __init__(self, weight_int8: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        if weight_int8.dtype != torch.int8 or weight_int8.dim() != 2:
            raise TypeError(
                f"weight_int8 must be a 2-d int8 tensor, got {weight_int8.dtype} {tuple(weight_int8.shape)}"
            )
        self.register_buffer("weight_int8", weight_int8)
        self.register_buffer("scales", scales)
        self.register_buffer("bias", bias)
        self.in_features = weight_int8.shape[1]
        self.out_features = weight_int8.shape[0]

    @classmethod
    def from_float(cls, linear: nn.Linear) -> Int8WeightOnlyLinear:
        w = linear.weight.detach()
        scales = (w.abs().amax(dim=1).float() / 127.0).clamp_min(1e-12)
        zero_points = torch.zeros(w.shape[0], dtype=torch.int64)
        q = torch.quantize_per_channel(w.float(), scales.cpu().double(), zero_points, 0, torch.qint8)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        return cls(q.int_repr(), q.q_per_channel_scales().float().to(w.device), bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.torch_tpu.int8_weight_only_linear(x, self.weight_int8, self.scales, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
