"""Runs one op_db entry for one dtype and direction on tpu and compares it with CPU PyTorch (worker side).

Forward: every tensor (and plain value) of the output must match CPU under torch.testing.assert_close's default
tolerances for its dtype (equal_nan). Backward: the float outputs (after the sample's output_process_fn_grad) are
back-propagated with fixed random output gradients and the gradients of every input that requires grad must match.
An op counts as falling back when torch_tpu's CPU fallback counter moved during the tpu run (for backward: during
the backward pass only).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

import torch_tpu
from torch_tpu.tools.opinfo_entries import DTYPES, backward_supported, skip_reason, upstream_note

SAMPLE_SEED = 0
RUN_SEED = 1234
GRAD_SEED = 4321


class Mismatch(Exception):
    """A tpu result differs from the CPU one; max_abs_diff is None when the difference is not numeric."""

    def __init__(self, text: str, max_abs_diff: float | None = None) -> None:
        super().__init__(text)
        self.max_abs_diff = max_abs_diff


def to_tpu(x: Any) -> Any:
    """A tpu copy of a sample argument: tensors (keeping requires_grad, as leaves), lists, tuples, dicts; a CPU
    device argument becomes tpu (factory functions)."""
    if isinstance(x, torch.Tensor):
        y = x.detach().to("tpu")
        return y.requires_grad_(x.requires_grad) if y.is_floating_point() or y.is_complex() else y
    if isinstance(x, torch.device) and x.type == "cpu":
        return torch.device("tpu")
    if isinstance(x, str) and x == "cpu":
        return "tpu"
    if isinstance(x, list):
        return [to_tpu(v) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return type(x)(to_tpu(v) for v in x) if type(x) in (tuple, torch.Size) else tuple(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def _tensors(x: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(x)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _max_abs_diff(actual: torch.Tensor, expected: torch.Tensor) -> float | None:
    if actual.shape != expected.shape or actual.numel() == 0:
        return None
    if actual.is_complex() or expected.is_complex():
        a, e = torch.view_as_real(actual.to(torch.complex128)), torch.view_as_real(expected.to(torch.complex128))
    else:
        a, e = actual.to(torch.float64), expected.to(torch.float64)
    same = (a == e) | (a.isnan() & e.isnan())
    diff = torch.where(same, torch.zeros_like(a), (a - e).abs())
    diff = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)
    return float(diff.max())


def compare(actual: Any, expected: Any, what: str) -> None:
    """Raises Mismatch when a tpu result (tree of tensors and values) differs from the CPU one."""
    act, act_spec = tree_flatten(actual)
    exp, exp_spec = tree_flatten(expected)
    if len(act) != len(exp):
        raise Mismatch(f"{what}: {len(act)} results, CPU has {len(exp)}")
    for i, (a, e) in enumerate(zip(act, exp, strict=True)):
        where = f"{what}[{i}]" if len(exp) > 1 else what
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Mismatch(f"{where}: {type(a).__name__}, CPU returns a tensor")
            if a.device.type != "tpu":
                raise Mismatch(f"{where}: result on {a.device}, expected tpu")
            if a.dtype != e.dtype:
                raise Mismatch(f"{where}: dtype {a.dtype}, CPU {e.dtype}")
            if a.shape != e.shape:
                raise Mismatch(f"{where}: shape {tuple(a.shape)}, CPU {tuple(e.shape)}")
            if e.layout != torch.strided:
                continue
            a_cpu, e_cpu = a.detach().cpu(), e.detach()
            try:
                torch.testing.assert_close(a_cpu, e_cpu, equal_nan=True)
            except AssertionError as err:
                raise Mismatch(f"{where}: {_mismatch_line(err)}", _max_abs_diff(a_cpu, e_cpu)) from None
        elif isinstance(e, (int, float, complex, bool)) and not isinstance(e, torch.Tensor):
            if a != e and not (isinstance(e, float) and math.isnan(e) and isinstance(a, float) and math.isnan(a)):
                try:
                    torch.testing.assert_close(a, e, equal_nan=True)
                except (AssertionError, TypeError):
                    raise Mismatch(f"{where}: {a!r}, CPU {e!r}") from None
        elif type(a) is not type(e) and not (e is None and a is None):
            raise Mismatch(f"{where}: {type(a).__name__}, CPU {type(e).__name__}")
    if len(exp) > 1 and act_spec != exp_spec and str(act_spec) != str(exp_spec):
        raise Mismatch(f"{what}: result structure differs from CPU")


def _mismatch_line(err: AssertionError) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    keep = [ln for ln in lines if ln.startswith(("Mismatched elements", "Greatest absolute"))]
    return "; ".join(keep) if keep else (lines[0] if lines else "values differ")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def _fallbacks() -> dict[str, int]:
    return dict(torch_tpu.metrics()["fallback_ops"])


def _merge(into: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _call(op: Any, sample: Any, seed: int) -> Any:
    torch.manual_seed(seed)
    return op(sample.input, *sample.args, **sample.kwargs)


class CpuFailed(Exception):
    """CPU PyTorch itself rejects the sample: nothing to compare against."""


def _reference(op: Any, sample: Any) -> Any:
    try:
        return _call(op, sample, RUN_SEED)
    except Exception as err:  # noqa: BLE001
        raise CpuFailed(_first_line(err)) from None


# Entries whose extra arguments PyTorch requires on the CPU whatever the input's device.
CPU_ARGS = {"tensor_split"}


def _move(op: Any, sample: Any) -> tuple[Any, Any, Any]:
    """tpu copies of (input, args, kwargs)."""
    keep_args = op.name in CPU_ARGS
    return to_tpu(sample.input), sample.args if keep_args else to_tpu(sample.args), to_tpu(sample.kwargs)


def _forward(op: Any, sample: Any, fallbacks: dict[str, int]) -> bool:
    tpu_input, tpu_args, tpu_kwargs = _move(op, sample)
    expected = _reference(op, sample)  # tpu copies are taken first: some entries write their inputs
    torch_tpu.reset_op_counts()
    try:
        torch.manual_seed(RUN_SEED)
        actual = op(tpu_input, *tpu_args, **tpu_kwargs)
        compare(actual, expected, "output")
        pairs = zip(_tensors([tpu_input, tpu_args]), _tensors([sample.input, sample.args]), strict=True)
        after = [(a, e) for a, e in pairs if a.device.type == "tpu"]
        compare([a for a, _ in after], [e for _, e in after], "input after the call")
    finally:
        _merge(fallbacks, _fallbacks())
    return True


def _backward(op: Any, sample: Any, fallbacks: dict[str, int]) -> bool:
    """False when the sample has nothing to differentiate."""
    cpu_leaves = [t for t in _tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]
    tpu_input, tpu_args, tpu_kwargs = _move(op, sample)
    tpu_leaves = [t for t in _tensors([tpu_input, tpu_args, tpu_kwargs]) if t.requires_grad]
    if not cpu_leaves or len(cpu_leaves) != len(tpu_leaves):
        return False
    process = sample.output_process_fn_grad
    expected = [t for t in _tensors(process(_reference(op, sample))) if t.requires_grad and t.is_floating_point()]
    if not expected:
        return False
    gen = torch.Generator().manual_seed(GRAD_SEED)
    seeds = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in expected]
    try:
        cpu_grads = torch.autograd.grad(expected, cpu_leaves, seeds, allow_unused=True)
    except Exception as err:  # noqa: BLE001  (CPU PyTorch cannot differentiate this sample)
        raise CpuFailed(_first_line(err)) from None
    torch.manual_seed(RUN_SEED)
    out = process(op(tpu_input, *tpu_args, **tpu_kwargs))
    actual = [t for t in _tensors(out) if t.requires_grad and t.is_floating_point()]
    if len(actual) != len(expected):
        raise Mismatch(f"{len(actual)} differentiable outputs, CPU has {len(expected)}")
    torch_tpu.reset_op_counts()
    try:
        tpu_grads = torch.autograd.grad(actual, tpu_leaves, [s.to("tpu") for s in seeds], allow_unused=True)
    finally:
        _merge(fallbacks, _fallbacks())
    for i, (a, e) in enumerate(zip(tpu_grads, cpu_grads, strict=True)):
        if (a is None) != (e is None):
            mine, cpus = ("None" if g is None else "a tensor" for g in (a, e))
            raise Mismatch(f"grad[{i}]: {mine}, CPU {cpus}")
        if e is not None:
            compare(a, e, f"grad[{i}]")
    return True


def run_check(op: Any, dtype: str, direction: str, samples: int) -> dict[str, Any]:
    """One result record: status pass / fallback / mismatch / error / skipped, with the reason and fallback ops."""
    start = time.monotonic()
    record: dict[str, Any] = {"status": "pass", "reason": "", "fallback_ops": {}, "max_abs_diff": None, "samples": 0}
    note = upstream_note(op, dtype)
    if note:
        record["upstream"] = note
    skip = skip_reason(op, dtype)
    if skip is None and direction == "backward" and not backward_supported(op, dtype):
        skip = "no autograd for this dtype"
    if skip is not None:
        record.update(status="skipped", reason=skip)
        return record
    backward = direction == "backward"
    fallbacks: dict[str, int] = {}
    mismatch: Mismatch | None = None
    error: str | None = None
    try:
        torch.manual_seed(SAMPLE_SEED)
        it = iter(op.sample_inputs("cpu", DTYPES[dtype], requires_grad=backward))
        for _ in range(samples):
            try:
                sample = next(it)
            except StopIteration:
                break
            except Exception as err:  # noqa: BLE001  (CPU PyTorch cannot make the sample: fewer samples)
                record["note"] = f"sample_inputs stopped: {_first_line(err)}"
                break
            try:
                ran = _backward(op, sample, fallbacks) if backward else _forward(op, sample, fallbacks)
                record["samples"] += int(ran)
            except CpuFailed:
                continue
            except Mismatch as m:
                record["samples"] += 1
                mismatch = mismatch or m
            except Exception as err:  # noqa: BLE001  (any failure of one sample is the finding)
                record["samples"] += 1
                error = error or _first_line(err)
    except Exception as err:  # noqa: BLE001  (CPU PyTorch cannot make the samples)
        record["note"] = f"sample_inputs failed: {_first_line(err)}"
    record["fallback_ops"] = fallbacks
    if mismatch is not None:
        record.update(status="mismatch", reason=str(mismatch), max_abs_diff=mismatch.max_abs_diff)
    elif error is not None:
        record.update(status="error", reason=error)
    elif record["samples"] == 0:
        why = record.get("note") or ("no sample to differentiate" if backward else "no samples CPU can run")
        record.update(status="skipped", reason=why)
    elif fallbacks:
        record.update(status="fallback", reason=", ".join(sorted(fallbacks)))
    record["seconds"] = round(time.monotonic() - start, 3)
    return record
