"""`python -m tests.ecosystem.titan.train [--reference-cpu] <torchtitan.train arguments>` under torchrun.

On tpu this is `-m torchtitan.train` plus one shim for TorchTitan 0.3.0 itself: it calls
`torch.distributed.set_timeout`, which torch 2.13 names `_set_pg_timeout` (same arguments), after the first step on
every device.

`--reference-cpu` makes the same run on CPU/Gloo, the reference the tpu run is compared with. TorchTitan cannot train
on CPU as it ships: it picks `cuda` when no accelerator is present, and its compiled FlexAttention refuses CPU
backward (inductor's CPU FlexAttention template has none). The reference therefore
1. names cpu as the device, with stand-ins for the memory queries its logging makes;
2. compiles FlexAttention with AOTAutograd and torch's own dense kernels (`aot_eager`), letting CPU through the
   device check;
3. sends FSDP's gradient reductions as SUM (Gloo has no PREMUL_SUM);
4. uses the DTensor RNG tracker tpu uses, so that both runs start from the same weights (tpu draws the numbers CPU
   draws for one seed).
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
import types
from pathlib import Path

import torch
import torch.distributed as dist


def _torch_213_names() -> None:
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = dist.distributed_c10d._set_pg_timeout  # type: ignore[attr-defined]


def _cpu_memory_monitor_names() -> None:
    """The CUDA-shaped calls TorchTitan makes that torch.cpu lacks (memory numbers it only logs, a device index)."""
    cpu = torch.cpu
    cpu.get_device_name = lambda device=None: "cpu"  # type: ignore[attr-defined]
    cpu.get_device_properties = lambda device=None: types.SimpleNamespace(name="cpu", total_memory=1 << 40)  # type: ignore[attr-defined]
    cpu.memory_stats = lambda device=None: {}  # type: ignore[attr-defined]
    cpu.reset_peak_memory_stats = lambda device=None: None  # type: ignore[attr-defined]
    cpu.empty_cache = lambda: None  # type: ignore[attr-defined]
    cpu.current_device = lambda: 0  # an index, as barrier(device_ids=[...]) takes (torch.cpu's says "cpu")


def _sum_reductions_for_gloo() -> None:
    """TorchTitan turns FSDP's gradient division off (factor 1.0), which FSDP sends as PREMUL_SUM(1.0): Gloo has no
    PREMUL_SUM (tpu_dist has), so the reference asks FSDP for plain SUM, the same sums."""
    from torch.distributed.fsdp import FSDPModule

    set_factor = FSDPModule.set_gradient_divide_factor

    def set_factor_as_sum(self: FSDPModule, factor: float) -> None:
        set_factor(self, factor)
        self.set_force_sum_reduction_for_comms(True)

    FSDPModule.set_gradient_divide_factor = set_factor_as_sum  # type: ignore[method-assign]


def _load_without_torch_tpu(relative: str) -> types.ModuleType:
    """One torch_tpu module that needs only torch, loaded from its file: importing the package would register the
    tpu device, and the reference must run as stock PyTorch on CPU."""
    path = Path(__file__).resolve().parents[3] / relative
    spec = importlib.util.spec_from_file_location("_reference_" + path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpu_reference() -> None:
    import torch._utils
    from torch.nn.attention import flex_attention as fa

    torch._utils._get_available_device_type = lambda: "cpu"
    _cpu_memory_monitor_names()
    _load_without_torch_tpu("torch_tpu/_op_policies.py").allow_flex_attention("cpu")
    from torchtitan.models.common.attention import FlexAttention

    FlexAttention._compiled_flex_attn = torch.compile(fa.flex_attention, backend="aot_eager")
    _load_without_torch_tpu("torch_tpu/_internal/distributed/dtensor_random.py").install(("cpu",))
    _sum_reductions_for_gloo()


def main() -> None:
    args = sys.argv[1:]
    _torch_213_names()
    if args and args[0] == "--reference-cpu":
        args = args[1:]
        _cpu_reference()
    sys.argv = ["torchtitan.train", *args]
    runpy.run_module("torchtitan.train", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
