"""TorchTPU's Pallas API, served as `torch.tpu.pallas`: `jax_op` (a JAX / Pallas function registered as a torch
custom op) and `get_pallas_mesh` (a JAX mesh aligned with the torch ranks).

Running JAX kernels on tpu tensors is issue 31 and not done yet: both names exist and raise NotImplementedError
saying so. Nothing here imports JAX.
"""

from __future__ import annotations

from torch_tpu._internal.pallas.mesh import get_pallas_mesh
from torch_tpu._internal.pallas.pallas import jax_op

__all__ = ["get_pallas_mesh", "jax_op"]
