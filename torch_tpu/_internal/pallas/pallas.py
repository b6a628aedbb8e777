"""`torch.tpu.pallas.jax_op`: a JAX function (jax.numpy, lax, or a Pallas `pallas_call`) registered as a torch
custom op.

The op's schema comes from the function's annotations (`_signature.py`). On tpu tensors the function's StableHLO,
lowered once per signature, becomes one node of torch_tpu's graph (`_bridge.py`): it fuses with its neighbours in
fused eager and is part of the program under torch.compile. CPU tensors run it through JAX's CPU backend. The fake
kernel asks JAX for the result shapes. A backward through `jax.vjp` is registered for ops returning an array or a
fixed tuple of arrays; `op.register_autograd(...)` replaces it with the caller's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_tpu._internal.pallas._bridge import Bridge, meta_results, run
from torch_tpu._internal.pallas._signature import Param, Signature, read_signature

__all__ = ["jax_op"]


def jax_op(
    name: str,
    fn: Callable[..., Any] | None = None,
    /,
    *,
    donate_argnums: Sequence[int] | None = None,
    mesh: Any = None,
    input_partition_specs: tuple[tuple[str, ...], ...] | None = None,
    output_partition_specs: tuple[tuple[str, ...], ...] | None = None,
) -> Any:
    """Registers the JAX function `fn` as the torch custom op `name` ("namespace::op") and returns it (a
    `torch.library.CustomOpDef`); without `fn`, a decorator that does so.

    `donate_argnums` is accepted and the inputs stay valid (nothing is donated). Sharded kernels (`mesh`, partition
    specs) are not supported yet.
    """
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise ValueError(f"jax_op: the op name {name!r} must be 'namespace::name' (one '::')")
    if mesh is not None or input_partition_specs is not None or output_partition_specs is not None:
        raise NotImplementedError("jax_op: sharded kernels (mesh, input/output partition specs) are not supported yet")
    del donate_argnums  # the inputs stay valid: donation only saves memory

    def register(f: Callable[..., Any]) -> Any:
        return _register(name, f)

    return register if fn is None else register(fn)


def _shaped(sig: Signature, outs: list[torch.Tensor], op: str) -> Any:
    if sig.returns == "tuple" and len(outs) != sig.n_returns:
        raise RuntimeError(f"{op}: the JAX function returned {len(outs)} arrays; its annotation says {sig.n_returns}")
    if sig.returns == "single":
        if len(outs) != 1:
            raise RuntimeError(f"{op}: the JAX function returned {len(outs)} arrays; its annotation says one")
        return outs[0]
    return tuple(outs) if sig.returns == "tuple" else list(outs)


def _custom_op(name: str, fn: Callable[..., Any], sig: Signature, bridge: Bridge) -> Any:
    def impl(*args: Any, **kwargs: Any) -> Any:
        outs, _ = run(bridge, bridge.bind(args, kwargs))
        return _shaped(sig, outs, name)

    def fake(*args: Any, **kwargs: Any) -> Any:
        return _shaped(sig, meta_results(bridge, bridge.bind(args, kwargs)), name)

    op = torch.library.custom_op(name, impl, mutates_args=(), schema=sig.schema())
    op.register_fake(fake)
    return op


def _register(name: str, fn: Callable[..., Any]) -> Any:
    sig = read_signature(fn)
    tensor_names = [p.name for p in sig.params if p.is_tensor]
    op = _custom_op(name, fn, sig, Bridge(name, fn, sig.python, tensor_names))
    if sig.returns != "list" and tensor_names:
        _register_vjp(name, fn, sig, op)
    return op


def _is_float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _register_vjp(name: str, fn: Callable[..., Any], sig: Signature, op: Any) -> None:
    """The backward of `op` as a second JAX op, `name` + "_jax_vjp": jax.vjp of `fn` with respect to its floating
    tensor arguments, at the cotangents of its floating results."""
    n_out = 1 if sig.returns == "single" else sig.n_returns
    names = [p.name for p in sig.params]
    cts = [inspect.Parameter(f"cotangent_{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(n_out)]
    vjp_python = sig.python.replace(parameters=cts + list(sig.python.parameters.values()), return_annotation=list)

    def vjp_fn(*args: Any, **kwargs: Any) -> list[Any]:
        import jax
        import jax.numpy as jnp

        bound = vjp_python.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        cotangents = [values.pop(p.name) for p in cts]
        diff = [n for n in names if _is_jax_float(values.get(n), jnp)]

        def forward(*primals: Any) -> list[Any]:
            inner = dict(values)
            inner.update(zip(diff, primals, strict=True))
            b = inspect.BoundArguments(sig.python, {n: inner[n] for n in names if n in inner})
            return [leaf for leaf in jax.tree_util.tree_leaves(fn(*b.args, **b.kwargs)) if _is_jax_float(leaf, jnp)]

        _, pullback = jax.vjp(forward, *[values[n] for n in diff])
        return list(pullback([c for c in cotangents if _is_jax_float(c, jnp)]))

    ct_params = tuple(Param(p.name, p.kind, "Tensor") for p in cts)
    vjp_sig = Signature(ct_params + sig.params, "list", 0, vjp_python)
    tensor_names = [p.name for p in vjp_sig.params if p.is_tensor]
    vjp_op = _custom_op(name + "_jax_vjp", vjp_fn, vjp_sig, Bridge(name + "_jax_vjp", vjp_fn, vjp_python, tensor_names))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        outs = [output] if sig.returns == "single" else list(output)
        ctx.out_meta = [(o.shape, o.dtype, o.device) for o in outs]
        args = dict(zip(names, inputs, strict=True))
        tensors = [n for n in names if isinstance(args[n], torch.Tensor)]
        ctx.save_for_backward(*[args[n] for n in tensors])
        ctx.tensor_names = tensors
        ctx.static = {n: v for n, v in args.items() if n not in tensors}

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        args = dict(ctx.static)
        args.update(zip(ctx.tensor_names, ctx.saved_tensors, strict=True))
        cotangents = [
            g if g is not None else torch.zeros(shape, dtype=dtype, device=device)
            for g, (shape, dtype, device) in zip(grads, ctx.out_meta, strict=True)
        ]
        diff = [n for n in names if _is_float(args[n])]
        results = vjp_op(*cotangents, **args) if diff else []
        by_name = dict(zip(diff, results, strict=True))
        return tuple(by_name.get(n) for n in names)

    op.register_autograd(backward, setup_context=setup_context)


def _is_jax_float(x: Any, jnp: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and bool(jnp.issubdtype(dtype, jnp.inexact))
