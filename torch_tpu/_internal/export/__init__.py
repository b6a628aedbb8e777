"""TorchTPU's `torch_tpu._internal.export`: torch.export programs and FX graphs as StableHLO modules."""

from __future__ import annotations

from torch_tpu._internal.export.export import ExportedMlir, exported_to_mlir, fx_to_mlir

__all__ = ["ExportedMlir", "exported_to_mlir", "fx_to_mlir"]
