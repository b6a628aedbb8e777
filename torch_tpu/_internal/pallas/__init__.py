"""TorchTPU's Pallas API, served as `torch.tpu.pallas`: `jax_op` (a JAX / Pallas function registered as a torch
custom op) and `get_pallas_mesh` (a JAX mesh aligned with the torch ranks).

`jax_op` works on tpu and CPU tensors (JAX is imported at the first registration, not before); `get_pallas_mesh`
(sharded kernels) raises NotImplementedError.
"""

from __future__ import annotations

from torch_tpu._internal.pallas.custom_kernel import custom_jax_kernel
from torch_tpu._internal.pallas.mesh import get_pallas_mesh
from torch_tpu._internal.pallas.pallas import jax_op

__all__ = ["custom_jax_kernel", "get_pallas_mesh", "jax_op"]
