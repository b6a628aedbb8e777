"""TorchTPU's functional optimizers and single-program trainer, served as `torch.tpu.optimizers`.

`Optimizer` is the interface (`init_param_group`, `step`, `defaults`); `AdamW`, `Sgd` and `Muon` implement it with
plain tensor ops, so they run on tpu and CPU tensors alike and trace under make_fx; `SingleTraceTrainer` traces the
forward, backward and optimizer step of a model into one program and compiles it.
"""

from __future__ import annotations

from torch_tpu._internal.optimizers.adamw import AdamW
from torch_tpu._internal.optimizers.muon import Muon
from torch_tpu._internal.optimizers.optim import Optimizer
from torch_tpu._internal.optimizers.sgd import Sgd
from torch_tpu._internal.optimizers.single_trace_trainer import SingleTraceTrainer

__all__ = ["Optimizer", "AdamW", "Sgd", "Muon", "SingleTraceTrainer"]
