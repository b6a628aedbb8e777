"""SingleTraceTrainer (`torch.tpu.optimizers.SingleTraceTrainer`): one traced program for forward, loss, backward and
the optimizer step.

`make_compiled_train_step(example_inputs, example_targets)` traces a pure function of the flattened (ParamGroup,
buffers, inputs[, targets]) with `make_fx` on fake tensors: `torch.func.grad_and_value` of the loss over the model run
by `functional_call`, then the functional optimizer's step (or, without an optimizer, the gradients as outputs). The
graph goes to a `compile_fn` (e.g. `torch.compile`, which on tpu tensors uses torch_tpu's "tpu" backend), called as
`compile_fn(graph_module)` when it takes one positional argument and `compile_fn(graph_module, flat_inputs)`
otherwise. The returned `train_step(inputs, targets=None)` runs that compiled callable and keeps the trainer's state
and the model's tensors current, then returns the loss.

Differences from TorchTPU's trainer: sparse embedding gradients are not rewritten into dense placeholders (torch_tpu
has no sparse tensors), and the experimental-API warnings are not emitted.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.func
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils import stateless
from torch.utils import _pytree

__all__ = ["SingleTraceTrainer"]

LossFn = Callable[..., torch.Tensor]


@contextlib.contextmanager
def _transformers_sees_tracing() -> Iterator[None]:
    """While active, Hugging Face's `masking_utils.is_tracing` answers True, so its mask code avoids data-dependent
    Python branches that make_fx cannot follow (it does not recognise functorch-wrapped tensors as traced)."""
    masking = sys.modules.get("transformers.masking_utils")
    original = getattr(masking, "is_tracing", None) if masking is not None else None
    if original is None:
        yield
        return
    masking.is_tracing = lambda tensor=None: True  # type: ignore[union-attr]
    try:
        yield
    finally:
        masking.is_tracing = original  # type: ignore[union-attr]


def _as_call_args(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A dict of inputs is keyword arguments, a tuple or list positional ones, anything else the single argument."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def _loss_of(out: Any, targets: Any) -> torch.Tensor:
    """The built-in loss: MSE against the targets when there are any, else the output's `loss` (attribute or key),
    else the mean of its `logits`, of its `sample`, or of its first tensor leaf."""
    if targets is not None:
        return torch.nn.functional.mse_loss(out, targets)
    for attr in ("loss", "logits", "sample"):
        value = getattr(out, attr, None)
        if value is None and isinstance(out, dict) and attr == "loss":
            value = out.get("loss")
        if value is not None:
            return value if attr == "loss" else value.mean()
    for leaf in _pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            return leaf.mean()
    raise TypeError(f"SingleTraceTrainer: cannot find a loss in a model output of type {type(out).__name__}")


def _call_compile_fn(
    compile_fn: Callable[..., Any], gm: torch.fx.GraphModule, flat_inputs: Sequence[Any]
) -> Callable[..., Any]:
    """Calls `compile_fn(gm)` when its signature takes exactly one positional argument (as `torch.compile`), else
    `compile_fn(gm, flat_inputs)` (as a Dynamo-style backend)."""
    try:
        params = list(inspect.signature(compile_fn).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is not None:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        return compile_fn(gm) if len(positional) == 1 and not varargs else compile_fn(gm, list(flat_inputs))
    try:
        return compile_fn(gm, list(flat_inputs))
    except TypeError:
        return compile_fn(gm)


class SingleTraceTrainer:
    """Trains `model` with steps that each run as one compiled program, the optimizer step included.

    Args:
      model: the module to train. Its parameters and buffers are taken (detached, sharing storage) under names whose
        dots are underscores; a callable `tie_weights` attribute is called first.
      optimizer: a functional optimizer (`AdamW`, `Sgd`, `Muon`, ...) run inside the program; None makes the step
        compute gradients only and store them in each parameter's `.grad`.
      compile_fn: the default compile callback of `make_compiled_train_step`.
      compute_loss_fn: `compute_loss_fn(model, args, kwargs) -> loss` replacing the built-in loss; it runs with the
        traced parameters and buffers swapped into `model` (tied weights swapped for every alias) and does not get the
        targets.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Any = None,
        compile_fn: Callable[..., Any] | None = None,
        compute_loss_fn: LossFn | None = None,
    ) -> None:
        self._model = model
        self._optimizer = optimizer
        self._compile_fn = compile_fn
        self._compute_loss_fn = compute_loss_fn
        tie = getattr(model, "tie_weights", None)
        if callable(tie):
            tie()
        self._key_map: dict[str, str] = {}
        params: dict[str, torch.Tensor] = {}
        for name, p in model.named_parameters():
            params[self._safe(name)] = p.detach()
        self._buffers: dict[str, torch.Tensor] = {}
        for name, b in model.named_buffers():
            self._buffers[self._safe(name)] = b.detach()
        self._param_group: Any = optimizer.init_param_group(params) if optimizer is not None else params

    def _safe(self, name: str) -> str:
        safe = name.replace(".", "_")
        self._key_map[safe] = name
        return safe

    @property
    def param_group(self) -> Any:
        """What the train step updates: the optimizer's ParamGroup, or a dict of parameters without an optimizer."""
        return self._param_group

    @property
    def params(self) -> dict[str, torch.Tensor]:
        """The trained parameters under the model's own (dotted) names."""
        group = self._param_group
        flat = group.params if hasattr(group, "params") else group
        return {self._key_map[k]: v for k, v in flat.items()}

    def _param_dict(self, group: Any) -> dict[str, torch.Tensor]:
        return group.params if hasattr(group, "params") else group

    def _loss(
        self, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], inputs: Any, targets: Any
    ) -> Any:
        named_p = {self._key_map[k]: v for k, v in params.items()}
        named_b = {self._key_map[k]: v for k, v in buffers.items()}
        args, kwargs = _as_call_args(inputs)
        backends = [torch.nn.attention.SDPBackend.OVERRIDEABLE, torch.nn.attention.SDPBackend.MATH]
        with torch.nn.attention.sdpa_kernel(backends):
            if self._compute_loss_fn is not None:
                with stateless._reparametrize_module(self._model, {**named_p, **named_b}, tie_weights=True):
                    return self._compute_loss_fn(self._model, args, kwargs), buffers
            out = torch.func.functional_call(self._model, (named_p, named_b), args, kwargs)
        return _loss_of(out, targets), buffers

    def make_compiled_train_step(
        self,
        example_inputs: Any,
        example_targets: Any = None,
        compile_fn: Callable[..., Any] | None = None,
    ) -> Callable[..., torch.Tensor]:
        """Traces and compiles one train step for inputs (and targets) shaped like the examples; returns
        `train_step(inputs, targets=None) -> loss`. Targets must be passed to it exactly when examples were given."""
        compile_fn = compile_fn if compile_fn is not None else self._compile_fn
        if compile_fn is None:
            raise ValueError(
                "SingleTraceTrainer needs a compile_fn, given to the constructor or to make_compiled_train_step"
            )
        has_targets = example_targets is not None

        def tree(inputs: Any, targets: Any) -> tuple[Any, ...]:
            return (self._param_group, self._buffers, inputs) + ((targets,) if has_targets else ())

        flat_inputs, in_spec = _pytree.tree_flatten(tree(example_inputs, example_targets))
        out_spec: list[Any] = []

        def pure_step(*flat: Any) -> tuple[Any, ...]:
            group, buffers, inputs, *rest = _pytree.tree_unflatten(list(flat), in_spec)
            targets = rest[0] if rest else None
            params = self._param_dict(group)
            if params:
                grads, (loss, new_buffers) = torch.func.grad_and_value(
                    lambda p, b: self._loss(p, b, inputs, targets), has_aux=True
                )(params, buffers)
            else:  # nothing to train: differentiate with respect to the inputs, so the step still has a backward
                grads, (loss, new_buffers) = torch.func.grad_and_value(
                    lambda x, b: self._loss({}, b, x, targets), has_aux=True
                )(inputs, buffers)
            if self._optimizer is not None:
                result = (loss, self._optimizer(group, grads), new_buffers)
            else:  # gradients as outputs, so the compiler keeps the backward
                result = (loss, grads, new_buffers)
            leaves, spec = _pytree.tree_flatten(result)
            out_spec[:] = [spec]
            return tuple(leaves)

        with _transformers_sees_tracing():
            gm = make_fx(pure_step, tracing_mode="fake")(*flat_inputs)
        compiled = _call_compile_fn(compile_fn, gm, flat_inputs)
        spec = out_spec[0]

        def train_step(inputs: Any, targets: Any = None) -> torch.Tensor:
            if (targets is None) == has_targets:
                raise ValueError("train_step takes targets exactly when make_compiled_train_step was given examples")
            flat, _ = _pytree.tree_flatten(tree(inputs, targets))
            loss, second, new_buffers = _pytree.tree_unflatten(list(compiled(*flat)), spec)
            self._store_buffers(new_buffers)
            if self._optimizer is not None:
                self._store_group(second)
            else:
                self._store_grads(second)
            return loss

        return train_step

    def _store_group(self, new_group: Any) -> None:
        """Keeps the state tensors (and so the model's parameters, which share storage) the same objects: a compile_fn
        that returns fresh tensors instead of updating its inputs in place has them copied back."""
        old_leaves = _pytree.tree_leaves(self._param_group)
        for old, new in zip(old_leaves, _pytree.tree_leaves(new_group), strict=True):
            if new is not old:
                old.copy_(new)

    def _store_buffers(self, new_buffers: dict[str, torch.Tensor]) -> None:
        for name, new in new_buffers.items():
            old = self._buffers[name]
            if new is not old:
                old.copy_(new)

    def _store_grads(self, grads: Any) -> None:
        if not isinstance(grads, dict):
            return  # gradients of the inputs (a model without parameters): nothing to store
        for name, p in self._model.named_parameters():
            g = grads.get(name.replace(".", "_"))
            if g is not None:
                p.grad = g
