"""Runs one op_db entry for one dtype and direction on tpu and compares it with CPU PyTorch (worker side).

Forward: every tensor (and plain value) of the output must match CPU under torch.testing.assert_close's default
tolerances for its dtype (equal_nan). Backward: the float outputs (after the sample's output_process_fn_grad) are
back-propagated with fixed random output gradients and the gradients of every input that requires grad must match.
An op counts as falling back when torch_tpu's CPU fallback counter moved during the tpu run (for backward: during
the backward pass only).

When floating results differ from CPU's, the sample is run once more on the CPU in float64 (same values, same output
gradients): if every tpu element is at least as close to that float64 answer as CPU's element is (give or take the
default tolerances of the dtype), the sample passes and the record says so (`cpu_differs`). That is the case where
torch_tpu rounds once where CPU rounds at every step (bf16/f16), or sums in another order; CPU's answer need not be
closer. Failing that, each result may be judged as a whole: its worst error against float64 no worse than CPU's
worst (plus one tolerance). For bfloat16/float16 results there is one more measure: the sample evaluated on the CPU
with every op computed in float32 and rounded once (PyTorch's opmath, as CUDA computes; see `opmath`). The
record names the measure that passed.
Index and integer outputs must still equal CPU's exactly, except for entries that do not promise which of several
equal elements they pick (sort without stable=True, topk): there the picked elements must be equal, and gradients
summed per group of equal inputs must match.
Outputs that are not unique (signs or phases of singular and eigen vectors) pass when they match after the sample's
output_process_fn_grad, which is how PyTorch's own test_compare_cpu compares them.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

import torch_tpu
from tools.opinfo import opmath
from tools.opinfo.entries import DTYPES, backward_supported, full_name, skip_reason, upstream_note

SAMPLE_SEED = 0
RUN_SEED = 1234
GRAD_SEED = 4321


class Mismatch(Exception):
    """A tpu result differs from the CPU one; max_abs_diff is None when the difference is not numeric."""

    def __init__(self, text: str, max_abs_diff: float | None = None) -> None:
        super().__init__(text)
        self.max_abs_diff = max_abs_diff


def _is_partial_view(x: torch.Tensor) -> bool:
    if x.layout != torch.strided or x.is_conj() or x.is_neg():
        return False
    return x.storage_offset() != 0 or x.untyped_storage().nbytes() != x.numel() * x.element_size()


def _partial_view_to_tpu(x: torch.Tensor) -> torch.Tensor:
    """A view into a part of its storage keeps its sizes, strides and offset over a tpu copy of the whole storage
    (`.to` would compact it, and ops like as_strided that look past the view would see other elements)."""
    n = x.untyped_storage().nbytes() // x.element_size()
    whole = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
    return whole.to("tpu").as_strided(x.size(), x.stride(), x.storage_offset()).detach()


def to_tpu(x: Any) -> Any:
    """A tpu copy of a sample argument: tensors (keeping requires_grad, as leaves), lists, tuples, dicts; a CPU
    device argument becomes tpu (factory functions)."""
    if isinstance(x, torch.Tensor):
        y = _partial_view_to_tpu(x) if _is_partial_view(x) else x.detach().to("tpu")
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


# Result dtypes where torch_tpu follows PyTorch's accelerator behaviour rather than its CPU one (entry -> why).
DEVICE_DTYPES = {
    "native_layer_norm": "mean/rstd stay float32 for reduced-precision input, as on CUDA (PyTorch's reference "
    "converts them to the input dtype on cpu and mtia only)",
}


# Entries that do not promise which of several equal elements they pick (sort without stable=True, topk): index
# results may differ from CPU's among ties; gradients then land on another element of the same tie.
TIE_ORDER = {"sort", "argsort", "msort", "topk"}


def _picks_same(x: torch.Tensor, a: torch.Tensor, e: torch.Tensor) -> bool:
    """Along some dim d, index results a and e pick equal elements of x, and where they span the whole dim both are
    permutations of it."""
    if x.dim() == 0:
        return torch.equal(a, e)
    for d in range(x.dim()):
        try:
            ga, ge = x.gather(d, a), x.gather(d, e)
        except RuntimeError:
            continue
        if not torch.equal(ga.nan_to_num(), ge.nan_to_num()):
            continue
        if a.shape[d] == x.shape[d] and not torch.equal(a.sort(d).values, e.sort(d).values):
            continue
        return True
    return False


def _tie_order_free(op: Any, sample: Any) -> bool:
    return op.name in TIE_ORDER and not sample.kwargs.get("stable", False) and isinstance(sample.input, torch.Tensor)


# Which results of a TIE_ORDER entry are indices (the others are values).
_INDEX_RESULTS = {"sort": {1}, "topk": {1}, "argsort": {0}, "msort": set()}


def same_up_to_ties(x: torch.Tensor, actual: Any, expected: Any, name: str = "sort") -> bool:
    """Forward results of a TIE_ORDER entry: values equal CPU's, and each index result picks elements equal to the
    ones CPU's indices pick."""
    act, exp = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if len(act) != len(exp):
        return False
    indices = _INDEX_RESULTS.get(name, set())
    for i, (a, e) in enumerate(zip(act, exp, strict=True)):
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor) or a.shape != e.shape:
            return False
        a = a.detach().cpu()
        if a.dtype != e.dtype:
            return False
        if i not in indices:
            if not torch.equal(a.nan_to_num(), e.nan_to_num()):
                return False
        elif not _picks_same(x.detach(), a, e):
            return False
    return True


def same_tie_sums(x: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Input gradients of a TIE_ORDER entry: the gradient summed over each group of equal input values matches."""
    if actual.shape != x.shape or expected.shape != x.shape:
        return False
    _, group = torch.unique(x.detach().float().nan_to_num(nan=math.inf), return_inverse=True)
    n = int(group.max()) + 1 if group.numel() else 0

    def sums(g: torch.Tensor) -> torch.Tensor:
        return torch.zeros(n, dtype=torch.float64).index_add_(0, group.flatten(), g.detach().cpu().double().flatten())

    try:
        rtol, atol = _TOLERANCES.get(expected.dtype, (1e-7, 1e-7))
        torch.testing.assert_close(sums(actual), sums(expected), rtol=rtol, atol=atol * max(1, x.numel()) ** 0.5)
    except AssertionError:
        return False
    return True


def compare(actual: Any, expected: Any, what: str, device_dtypes: bool = False) -> None:
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
            if a.dtype != e.dtype and not (device_dtypes and a.dtype == torch.float32 and e.is_floating_point()):
                raise Mismatch(f"{where}: dtype {a.dtype}, CPU {e.dtype}")
            if a.shape != e.shape:
                raise Mismatch(f"{where}: shape {tuple(a.shape)}, CPU {tuple(e.shape)}")
            if e.layout != torch.strided:
                continue
            a_cpu, e_cpu = a.detach().cpu().to(e.dtype), e.detach()
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


# torch.testing.assert_close's default (rtol, atol) per dtype.
_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
}


_WIDER = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex64: torch.complex128,
}


def _widened(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in `dtype` with the same sizes, strides and storage offset over a widened copy of its whole storage (view
    ops that look past the view, like as_strided, see the same elements)."""
    n = x.untyped_storage().nbytes() // x.element_size()
    whole = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
    y = whole.to(dtype).as_strided(x.size(), x.stride(), x.storage_offset())
    return y.detach().requires_grad_(x.requires_grad)


def to_float64(x: Any) -> Any:
    """A copy of a sample argument with every float16/bfloat16/float32 (complex64) tensor in float64 (complex128)."""
    if isinstance(x, torch.Tensor):
        return _widened(x, _WIDER[x.dtype]) if x.dtype in _WIDER and x.layout == torch.strided else x
    if isinstance(x, list):
        return [to_float64(v) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return type(x)(to_float64(v) for v in x) if type(x) in (tuple, torch.Size) else tuple(map(to_float64, x))
    if isinstance(x, dict):
        return {k: to_float64(v) for k, v in x.items()}
    return x


def _abs_error(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|x - ref| elementwise in float64; 0 where both are equal (infinities, NaN and NaN), inf where only one is NaN."""
    if x.is_complex() or ref.is_complex():
        x, ref = torch.view_as_real(x.to(torch.complex128)), torch.view_as_real(ref.to(torch.complex128))
    x, ref = x.to(torch.float64), ref.to(torch.float64)
    same = (x == ref) | (x.isnan() & ref.isnan())
    err = torch.where(same, torch.zeros_like(x), (x - ref).abs())
    return torch.where(err.isnan(), torch.full_like(err, math.inf), err)


def agrees_with_float64(
    actual: list[Any], expected: list[Any], reference: list[Any], *, worst_case: bool = False
) -> bool:
    """True when every floating tpu result is at least as close to the float64 reference (rounded to the result's
    dtype) as CPU's result is, give or take the dtype's default tolerances, element by element; every other result
    must equal CPU's. With `worst_case`, each floating result is judged as a whole instead: its largest error, in
    units of the tolerance at each element, may exceed CPU's largest by at most one unit. Two results that round
    differently but are equally accurate pass that; element by element, one of them is bound to lose somewhere."""
    if not (len(actual) == len(expected) == len(reference)):
        return False
    for a, e, r in zip(actual, expected, reference, strict=True):
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
            if a != e:
                return False
            continue
        if e.dtype not in _TOLERANCES or not isinstance(r, torch.Tensor) or r.shape != a.shape or a.shape != e.shape:
            try:
                compare(a, e, "result")
            except Mismatch:
                return False
            continue
        rtol, atol = _TOLERANCES[e.dtype]
        rounded = r.detach().to(e.dtype)  # the float64 answer rounded to the result's dtype (inf past its range)
        tpu_err = _abs_error(a.detach().cpu().to(e.dtype), rounded)
        cpu_err = _abs_error(e.detach(), rounded)
        cpu_err = torch.where(cpu_err.isfinite(), cpu_err, torch.zeros_like(cpu_err))  # a non-finite CPU answer
        tol = atol + rtol * _abs_error(rounded, torch.zeros_like(rounded))  # the scale excuses nothing
        if worst_case:
            if tpu_err.numel() and float((tpu_err / tol).max()) > float((cpu_err / tol).max()) + 1:
                return False
        elif not bool((tpu_err <= tol + cpu_err).all()):
            return False
    return True


def _float64_measure(actual: list[Any], expected: list[Any], reference: list[Any]) -> str | None:
    """The float64 measure the results pass (for the record), or None."""
    if agrees_with_float64(actual, expected, reference):
        return "agrees with float64"
    if agrees_with_float64(actual, expected, reference, worst_case=True):
        return "as accurate as CPU by float64 (worst error per result)"
    return None


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


def _float64_forward(op: Any, sample64: tuple[Any, Any, Any]) -> Any:
    inp, args, kwargs = sample64
    try:
        torch.manual_seed(RUN_SEED)
        return op(inp, *args, **kwargs)
    except Exception:  # noqa: BLE001  (no float64 answer: the CPU comparison stands)
        return None


def _same_after_process(sample: Any, actual: Any, expected: Any) -> bool:
    """True when the outputs match after the sample's output_process_fn_grad, as PyTorch's test_compare_cpu compares
    them: op_db uses it to make results that are not unique (signs/phases of singular and eigen vectors) comparable."""
    try:
        compare(sample.output_process_fn_grad(actual), sample.output_process_fn_grad(expected), "processed output")
    except Exception:  # noqa: BLE001  (no comparable processed form: the raw mismatch stands)
        return False
    return True


def _forward(op: Any, sample: Any, fallbacks: dict[str, int], notes: list[str]) -> bool:
    tpu_input, tpu_args, tpu_kwargs = _move(op, sample)
    sample64 = tuple(to_float64(x) for x in (sample.input, sample.args, sample.kwargs))  # before CPU writes them
    sample_opmath = _opmath_copy(sample)
    expected = _reference(op, sample)  # tpu copies are taken first: some entries write their inputs
    torch_tpu.reset_op_counts()
    try:
        torch.manual_seed(RUN_SEED)
        actual = op(tpu_input, *tpu_args, **tpu_kwargs)
        try:
            compare(actual, expected, "output", device_dtypes=full_name(op) in DEVICE_DTYPES)
        except Mismatch as m:
            if _tie_order_free(op, sample) and same_up_to_ties(sample.input, actual, expected, op.name):
                notes.append(f"equal elements picked in another order: {m}")
                return True
            if _same_after_process(sample, actual, expected):
                notes.append(f"equal after op_db's output_process_fn_grad (signs of singular/eigen vectors): {m}")
                return True
            if m.max_abs_diff is None:
                raise
            reference = _float64_forward(op, sample64)
            measure = None
            if reference is not None:
                flat = [tree_flatten(x)[0] for x in (actual, expected, reference)]
                measure = _float64_measure(*flat)
            if measure is None and _matches_opmath_forward(op, sample_opmath, actual):
                measure = OPMATH_NOTE
            if measure is None:
                raise
            notes.append(f"{measure}: output ({m})")
        pairs = zip(_tensors([tpu_input, tpu_args]), _tensors([sample.input, sample.args]), strict=True)
        after = [(a, e) for a, e in pairs if a.device.type == "tpu"]
        compare([a for a, _ in after], [e for _, e in after], "input after the call")
    finally:
        _merge(fallbacks, _fallbacks())
    return True


def _float64_grads(op: Any, sample64: tuple[Any, Any, Any], process: Any, seeds: list[torch.Tensor]) -> Any:
    """Input gradients of the sample computed in float64 on the CPU with the same output gradients (None if CPU
    PyTorch cannot)."""
    inp, args, kwargs = sample64
    leaves = [t for t in _tensors([inp, args, kwargs]) if t.requires_grad]
    try:
        torch.manual_seed(RUN_SEED)
        outs = [t for t in _tensors(process(op(inp, *args, **kwargs))) if t.requires_grad and t.is_floating_point()]
        if len(outs) != len(seeds):
            return None
        grads = [s.to(o.dtype) for s, o in zip(seeds, outs, strict=True)]
        return torch.autograd.grad(outs, leaves, grads, allow_unused=True)
    except Exception:  # noqa: BLE001  (no float64 answer: the CPU comparison stands)
        return None


OPMATH_NOTE = "matches PyTorch's opmath evaluation (float32 per op, rounded once, as CUDA computes)"


def _opmath_copy(sample: Any) -> tuple[Any, Any, Any] | None:
    """Fresh copies of a bfloat16/float16 sample for the opmath measure (None for other dtypes)."""
    parts = (sample.input, sample.args, sample.kwargs)
    if not any(t.dtype in opmath.HALF for t in _tensors(parts)):
        return None
    return opmath.fresh_copy(parts)


def _matches_opmath_forward(op: Any, sample: tuple[Any, Any, Any] | None, actual: Any) -> bool:
    if sample is None:
        return False
    inp, args, kwargs = sample
    try:
        with opmath.OpmathMode():
            torch.manual_seed(RUN_SEED)
            reference = op(inp, *args, **kwargs)
        compare(actual, reference, "output")
    except Exception:  # noqa: BLE001  (no opmath answer, or another one: the mismatch stands)
        return False
    return True


def _matches_opmath_grads(
    op: Any, sample: tuple[Any, Any, Any] | None, process: Any, seeds: list[torch.Tensor], tpu_grads: Any
) -> bool:
    if sample is None:
        return False
    inp, args, kwargs = sample
    leaves = [t for t in _tensors([inp, args, kwargs]) if t.requires_grad]
    try:
        with opmath.OpmathMode():
            torch.manual_seed(RUN_SEED)
            outs = [t for t in _tensors(process(op(inp, *args, **kwargs))) if t.requires_grad and t.is_floating_point()]
            if len(outs) != len(seeds) or len(leaves) != len(tpu_grads):
                return False
            grads = torch.autograd.grad(
                outs, leaves, [s.to(o.dtype) for s, o in zip(seeds, outs, strict=True)], allow_unused=True
            )
        pairs = [(a, g) for a, g in zip(tpu_grads, grads, strict=True) if g is not None or a is not None]
        compare([a for a, _ in pairs], [g for _, g in pairs], "grad")
    except Exception:  # noqa: BLE001  (no opmath answer, or another one: the mismatch stands)
        return False
    return True


def _backward(op: Any, sample: Any, fallbacks: dict[str, int], notes: list[str]) -> bool:
    """False when the sample has nothing to differentiate."""
    cpu_leaves = [t for t in _tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]
    sample64 = tuple(to_float64(x) for x in (sample.input, sample.args, sample.kwargs))
    sample_opmath = _opmath_copy(sample)
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
    pairs = [(a, e) for a, e in zip(tpu_grads, cpu_grads, strict=True) if e is not None]
    try:
        for i, (a, e) in enumerate(pairs):
            compare(a, e, f"grad[{i}]")
    except Mismatch as m:
        tied = _tie_order_free(op, sample) and len(pairs) == 1
        if tied and same_tie_sums(sample.input, pairs[0][0], pairs[0][1]):
            notes.append(f"gradient on other equal elements (sums per tie group match): {m}")
            return True
        if m.max_abs_diff is None:
            raise
        grads64 = _float64_grads(op, sample64, process, seeds)
        measure = None
        if grads64 is not None and len(grads64) == len(cpu_grads):
            refs = [r for r, e in zip(grads64, cpu_grads, strict=True) if e is not None]
            measure = _float64_measure([a for a, _ in pairs], [e for _, e in pairs], refs)
        if measure is None and _matches_opmath_grads(op, sample_opmath, process, seeds, tpu_grads):
            measure = OPMATH_NOTE
        if measure is None:
            raise
        notes.append(f"{measure}: {m}")
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
    closer: list[str] = []  # samples that differ from CPU but agree with the float64 answer
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
                check = _backward if backward else _forward
                ran = check(op, sample, fallbacks, closer)
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
    if closer and mismatch is None and error is None:
        shown = next((n for n in closer if n.startswith("as accurate")), closer[0])  # the weaker measure if used
        record["cpu_differs"] = f"{len(closer)} sample(s) differ from CPU, right by another measure: {shown}"
    if mismatch is not None:
        # op_db itself expects test_compare_cpu to fail on accelerators for these: reported apart, not as wrong.
        expected = note == "op_db expects test_compare_cpu to fail"
        status = "xfail" if expected else "mismatch"
        record.update(status=status, reason=str(mismatch), max_abs_diff=mismatch.max_abs_diff)
    elif error is not None:
        record.update(status="error", reason=error)
    elif record["samples"] == 0:
        why = record.get("note") or ("no sample to differentiate" if backward else "no samples CPU can run")
        record.update(status="skipped", reason=why)
    elif fallbacks:
        record.update(status="fallback", reason=", ".join(sorted(fallbacks)))
    record["seconds"] = round(time.monotonic() - start, 3)
    return record
