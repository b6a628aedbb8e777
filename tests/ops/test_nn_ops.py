"""Softmax, losses, layer norm and dropout backward on tpu against CPU PyTorch, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def labels(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=g)


# ---- softmax family ----


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_dims(fn, dim):
    check(lambda x: fn(x, dim), r(3, 4, 5))


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_large_values_stay_finite(fn):
    check(lambda x: fn(x * 1000, -1), r(4, 6), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_scalar_and_vector(fn):
    check(lambda x: fn(x, 0), r(7))
    check(lambda x: fn(x, 0), torch.tensor(0.3))


def test_softmax_with_masked_entries():
    mask = torch.tensor([[False, True, False, True], [True, False, False, False]])
    check(lambda x, m: F.softmax(x.masked_fill(m, float("-inf")), -1), r(2, 4), mask)


def test_softmax_dtype_argument():
    check(lambda x: F.log_softmax(x, 1, dtype=torch.float64), r(3, 4))


def test_softmax_bfloat16():
    x = r(4, 8).to(torch.bfloat16)
    check(lambda t: F.softmax(t, -1), x, rtol=2e-2, atol=2e-2)
    check(lambda t: F.log_softmax(t, -1), x, rtol=2e-2, atol=2e-2)


def test_softmax_out_variants():
    def fn(x):
        out = torch.empty_like(x)
        torch.ops.aten._log_softmax.out(x, 1, False, out=out)
        return out

    check(fn, r(3, 4), grad=False)


def test_softmax_backward_ops_directly():
    y = torch.softmax(r(3, 5), 1)
    check(lambda gr, out: torch.ops.aten._softmax_backward_data(gr, out, 1, torch.float32), r(3, 5), y, grad=False)
    ly = torch.log_softmax(r(3, 5), 0)
    check(lambda gr, out: torch.ops.aten._log_softmax_backward_data(gr, out, 0, torch.float32), r(3, 5), ly, grad=False)


# ---- cross entropy / nll ----


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_reductions(reduction):
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), r(6, 5), labels(5, 6))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index(reduction):
    target = torch.tensor([0, -100, 3, 4, -100, 1])
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), r(6, 5), target)
    target = torch.tensor([0, 2, 3, 2, 1, 2])
    check(lambda x, t: F.cross_entropy(x, t, ignore_index=2, reduction=reduction), r(6, 5), target)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_class_weights(reduction):
    target = torch.tensor([0, 4, 3, 4, -100, 1, 2])
    check(lambda x, t, w: F.cross_entropy(x, t, weight=w.detach(), reduction=reduction), r(7, 5), target, torch.rand(5))


def test_cross_entropy_everything_ignored_is_nan():
    check(lambda x, t: F.cross_entropy(x, t), r(4, 3), torch.full((4,), -100))


def test_cross_entropy_single_sample():
    check(lambda x, t: F.cross_entropy(x, t), r(5), torch.tensor(2))
    check(lambda x, t: F.cross_entropy(x, t, reduction="none"), r(5), torch.tensor(2))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_spatial(reduction):
    # 4-D inputs go through nll_loss2d; 3-D ones are reshaped onto it.
    target = labels(4, 2, 3, 5)
    target[0, 1, 2] = -100
    check(
        lambda x, t, w: F.cross_entropy(x, t, weight=w.detach(), reduction=reduction),
        r(2, 4, 3, 5),
        target,
        torch.rand(4),
    )
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), r(2, 4, 6), labels(4, 2, 6))


def test_cross_entropy_label_smoothing_and_soft_targets():
    check(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), r(6, 5), labels(5, 6))
    check(lambda x, p: F.cross_entropy(x, p.softmax(1)), r(6, 5), r(6, 5))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    target = torch.tensor([1, 0, 3, -100, 2])
    check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction=reduction), r(5, 4), target)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w.detach(), reduction=reduction), r(5, 4), target, torch.rand(4))


# ---- pointwise losses ----


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    check(lambda x, y: F.mse_loss(x, y, reduction=reduction), r(3, 4), r(3, 4))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    # The target is detached: its gradient needs aten::logit, which has no lowering. Weights take no gradient.
    def bce(x, t, w=None):
        w = None if w is None else w.detach()
        return F.binary_cross_entropy(x.sigmoid(), t.detach(), weight=w, reduction=reduction)

    target = torch.rand(3, 4, generator=g)
    check(bce, r(3, 4), target)
    check(bce, r(3, 4), target, r(4).abs())


def test_binary_cross_entropy_clamps_log_at_saturation():
    x = torch.tensor([0.0, 1.0, 0.5, 1e-30])
    check(lambda p, t: F.binary_cross_entropy(p, t), x, torch.tensor([1.0, 0.0, 1.0, 1.0]), grad=False)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(reduction):
    check(lambda x, y: F.binary_cross_entropy_with_logits(x * 10, y.sigmoid(), reduction=reduction), r(3, 4), r(3, 4))
    check(
        lambda x, y, w, pw: F.binary_cross_entropy_with_logits(
            x, y.sigmoid(), w.detach(), pos_weight=pw.detach(), reduction=reduction
        ),
        r(3, 4),
        r(3, 4),
        r(3, 4).abs(),
        r(4).abs(),
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_smooth_l1_loss(reduction, beta):
    check(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=beta), r(4, 5), r(4, 5))


def test_smooth_l1_loss_beta_zero_is_l1():
    check(lambda x, y: F.smooth_l1_loss(x, y, beta=0.0), r(4, 5), r(4, 5))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("delta", [1.0, 0.3])
def test_huber_loss(reduction, delta):
    check(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=delta), r(4, 5), r(4, 5))


# ---- layer norm ----


@pytest.mark.parametrize("shape", [(5,), (4, 5)])
def test_layer_norm_without_affine(shape):
    check(lambda x: F.layer_norm(x, shape), r(3, 4, 5), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(5,), (4, 5)])
def test_layer_norm_affine(shape):
    check(
        lambda x, w, b: F.layer_norm(x, shape, w, b, eps=1e-3), r(3, 4, 5), r(*shape), r(*shape), rtol=1e-4, atol=1e-5
    )


def test_layer_norm_parameter_grads_only():
    check(lambda x, w, b: F.layer_norm(x.detach(), (6,), w, b), r(2, 6), r(6), r(6), rtol=1e-4, atol=1e-5)


def test_layer_norm_weight_only():
    check(lambda x, w: F.layer_norm(x, (6,), w), r(2, 6), r(6), rtol=1e-4, atol=1e-5)


def test_layer_norm_module():
    ln = nn.LayerNorm(6)

    def call(x, w, b):  # the parameters come in as arguments, so the harness compares their gradients too
        return functional_call(ln, {"weight": w, "bias": b}, (x,))

    check(call, r(2, 3, 6), r(6), r(6), rtol=1e-4, atol=1e-5)
    check(nn.LayerNorm(6, elementwise_affine=False), r(2, 3, 6), rtol=1e-4, atol=1e-5)


def test_layer_norm_statistics():
    check(lambda x: torch.native_layer_norm(x, [4], None, None, 1e-5), r(2, 3, 4), grad=False, rtol=1e-4, atol=1e-5)


def test_layer_norm_bfloat16():
    x, w, b = r(4, 8).bfloat16(), r(8).bfloat16(), r(8).bfloat16()
    check(lambda t, wt, bt: F.layer_norm(t, (8,), wt, bt), x, w, b, rtol=2e-2, atol=5e-2)


# ---- dropout ----


def test_native_dropout_backward():
    mask = torch.rand(3, 4, generator=g) > 0.5
    check(lambda gr, m: torch.ops.aten.native_dropout_backward(gr, m, 2.0), r(3, 4), mask, grad=False)


def test_logsigmoid():
    check(lambda x: F.logsigmoid(x * 30), r(4, 5))


def test_dropout_training_backward():
    # The tpu draws its own mask, so check the gradient against that mask rather than against the CPU.
    torch_tpu.reset_op_counts()
    x = (r(50, 20).abs() + 0.1).to("tpu").requires_grad_()
    y = F.dropout(x, 0.25, training=True)
    y.backward(torch.ones_like(y))
    kept = (y != 0).cpu()
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.75)
    assert torch_tpu.metrics()["lowered_ops"].get("aten::native_dropout_backward", 0) == 1
    assert not torch_tpu.metrics()["fallback_ops"]


def test_out_of_range_target_raises_like_cpu():
    logits, target = torch.randn(3, 4), torch.tensor([0, 4, 1])
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(logits, target)
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(logits.to("tpu"), target.to("tpu")).cpu()
    ignored = torch.tensor([0, -100, 1])
    torch.testing.assert_close(
        F.cross_entropy(logits.to("tpu"), ignored.to("tpu")).cpu(), F.cross_entropy(logits, ignored)
    )


# ---- cdist, convolution in half precision ----


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist(p):
    # compute_mode 2 keeps p = 2 on the direct formula (_cdist_forward) rather than the matmul one.
    mode = "donot_use_mm_for_euclid_dist"
    check(lambda a, b: torch.cdist(a, b, p=p, compute_mode=mode), r(5, 3), r(4, 3), rtol=1e-5, atol=1e-5)
    check(lambda a, b: torch.cdist(a, b, p=p, compute_mode=mode), r(2, 3, 4), r(1, 5, 4), rtol=1e-5, atol=1e-5)


def test_cdist_equal_rows_and_noncontiguous():
    mode = "donot_use_mm_for_euclid_dist"
    a = r(4, 3)
    b = torch.cat([a[:2], r(2, 3)])
    for p in [1.0, 2.0, 3.0]:
        check(lambda x, y, p=p: torch.cdist(x, y, p=p, compute_mode=mode), a, b, rtol=1e-5, atol=1e-5)
    check(lambda x, y: torch.cdist(x, y, compute_mode=mode), r(3, 6)[:, ::2], r(6, 5).t()[:, :3])


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    check(lambda x: F.pdist(x, p=p), r(5, 3), rtol=1e-5, atol=1e-5)
    check(lambda x: F.pdist(x, p=p), r(2, 4), rtol=1e-5, atol=1e-5)
    check(lambda x: F.pdist(x, p=p), r(4, 6)[:, ::2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda x, w: F.conv_transpose2d(x, w.transpose(0, 1), stride=2, padding=1),
    ],
)
def test_conv_bfloat16_accumulates_in_float(fn):
    # The CPU computes half-type convolutions in float and rounds once; so must the tpu (not accumulate in bf16).
    x, w = r(2, 4, 9, 7).bfloat16(), r(6, 4, 3, 3).bfloat16()
    expected = fn(x.float(), w.float()).bfloat16()
    actual = fn(x.to("tpu"), w.to("tpu")).cpu()
    assert actual.dtype == torch.bfloat16
    torch.testing.assert_close(actual, expected, rtol=1.6e-2, atol=1e-2)


# ---- multi_margin_loss, index_reduce ----


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss_forward_backward(p, reduction):
    # multi_margin_loss_backward has no meta kernel in PyTorch: torch_tpu._meta supplies one, so it runs lowered.
    x, y, w = r(5, 4), labels(4, 5), r(4).abs()
    check(lambda a, t: F.multi_margin_loss(a, t, p=p, margin=0.7, reduction=reduction), x, y)
    check(lambda a, t: F.multi_margin_loss(a, t, p=p, weight=w.to(a.device), reduction=reduction), x, y)
    if reduction != "none":  # unbatched with "none": PyTorch's meta kernel says (1,), its CPU kernel ()
        check(lambda a, t: F.multi_margin_loss(a, t, p=p, reduction=reduction), r(4), labels(4))


def test_multi_margin_loss_target_out_of_range_raises():
    with pytest.raises(IndexError, match="target out of range"):
        F.multi_margin_loss(r(3, 4).to("tpu"), torch.tensor([0, 4, 1]).to("tpu")).cpu()


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x, src = (r(5, 3) * 4).to(dtype), (r(4, 3) * 4).to(dtype)
    index = torch.tensor([0, 4, 0, 2])
    tol = {"rtol": 1.6e-2, "atol": 1e-5} if dtype == torch.bfloat16 else {}
    grad = dtype == torch.float32 and reduce in ("prod", "mean")
    check(
        lambda a, s: a.index_reduce(0, index.to(a.device), s, reduce, include_self=include_self),
        x,
        src,
        grad=grad,
        **tol,
    )
    check(
        lambda a, s: a.index_reduce(1, torch.tensor([2, 2, 0, 1]).to(a.device), s, reduce, include_self=include_self),
        x.t(),
        src.t(),
        grad=grad,
        **tol,
    )


def test_index_reduce_nan_and_bad_index():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    src = torch.tensor([[float("nan"), 0.0], [5.0, -1.0]])
    check(lambda a, s: a.index_reduce(0, torch.tensor([1, 1]).to(a.device), s, "amax"), x, src, grad=False)
    with pytest.raises(IndexError, match="index out of range in self"):
        x.to("tpu").index_reduce(0, torch.tensor([0, 2]).to("tpu"), src.to("tpu"), "prod").cpu()


def test_bilinear_bfloat16_backward():
    # F.bilinear's backward runs batched dots of bf16 operands into float32 (XLA-CPU has no such kernel: widened).
    g = torch.Generator().manual_seed(14)
    x1, x2 = torch.randn(8, 3, generator=g).bfloat16(), torch.randn(8, 4, generator=g).bfloat16()
    w, bias = torch.randn(5, 3, 4, generator=g).bfloat16(), torch.randn(5, generator=g).bfloat16()
    check(F.bilinear, x1, x2, w, bias, rtol=1.6e-2, atol=2e-2)


# ---- the batch norm overloads export and torch.compile graphs use ----

BN = torch.ops.aten
BN_OVERLOADS = {
    "with_update": lambda x, w, b, rm, rv: BN._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5),
    "no_update": lambda x, w, b, rm, rv: BN._batch_norm_no_update(x, w, b, rm, rv, 0.1, 1e-5)[:1],
    "legit_train": lambda x, w, b, rm, rv: BN._native_batch_norm_legit(x, w, b, rm, rv, True, 0.1, 1e-5),
    "legit_eval": lambda x, w, b, rm, rv: BN._native_batch_norm_legit(x, w, b, rm, rv, False, 0.1, 1e-5)[:1],
    "no_stats": lambda x, w, b, rm, rv: BN._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
}


@pytest.mark.parametrize("name", list(BN_OVERLOADS))
def test_batch_norm_overloads_update_running_stats(name):
    """Results (evaluation overloads: the output; PyTorch's meta kernels size their unused statistics differently
    from CPU's) and the running statistics updated in place equal CPU's, with no CPU fallback."""
    fn = BN_OVERLOADS[name]
    x, w, b = r(4, 3, 5, 5), torch.rand(3, generator=g), torch.rand(3, generator=g)
    rm, rv = torch.rand(3, generator=g), torch.rand(3, generator=g) + 0.5
    rm_cpu, rv_cpu, rm_tpu, rv_tpu = rm.clone(), rv.clone(), rm.to("tpu"), rv.to("tpu")
    expected = fn(x, w, b, rm_cpu, rv_cpu)
    torch_tpu.reset_op_counts()
    actual = fn(x.to("tpu"), w.to("tpu"), b.to("tpu"), rm_tpu, rv_tpu)
    assert not torch_tpu.metrics()["fallback_ops"]
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a.cpu(), e)
    torch.testing.assert_close(rm_tpu.cpu(), rm_cpu)
    torch.testing.assert_close(rv_tpu.cpu(), rv_cpu)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction: str) -> None:
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    # A -1 ends each row's targets; a class listed twice counts twice; the entries after -1 are ignored.
    y = torch.tensor([[3, 0, -1, 1, 1], [2, 2, -1, 4, 4], [0, 1, 2, 3, 4], [-1, 0, 0, 0, 0]])
    check(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction), x, y)
    # One sample, 1-D: with reduction='none' CPU's loss is 0-d where PyTorch's meta says [1]; that call falls back.
    one_sample_fallback = ["aten::multilabel_margin_loss_forward"] if reduction == "none" else []
    check(
        lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction), x[0], y[0], allow_fallback=one_sample_fallback
    )
    check(lambda a, t: torch.ops.aten.multilabel_margin_loss_forward(a, t, 1)[1], x, y, grad=False)  # is_target
    with pytest.raises(RuntimeError, match="'target' is out of range"):
        F.multilabel_margin_loss(x.to("tpu"), torch.full((4, 5), 5).to("tpu")).cpu()


# ---- weight norm ----


@pytest.mark.parametrize(("shape", "dim"), [((6, 4, 3), 0), ((6, 4, 3), 2), ((5, 7), 0), ((5, 7), -1)])
def test_weight_norm_interface(shape, dim):
    # torch._weight_norm takes the fused _weight_norm_interface (and its backward) for the first and the last dim.
    kept = [s if i == dim % len(shape) else 1 for i, s in enumerate(shape)]
    check(
        lambda v, gain: torch._weight_norm(v, gain, dim % len(shape)),
        r(*shape),
        r(*kept).abs() + 0.5,
        rtol=1e-4,
        atol=1e-5,
    )
    lowered = torch_tpu.metrics()["lowered_ops"]
    assert lowered.get("aten::_weight_norm_interface", 0) == 1
    assert lowered.get("aten::_weight_norm_interface_backward", 0) == 1


def test_weight_norm_interface_norms_and_bfloat16():
    v, gain = r(4, 3, 2), r(4, 1, 1)
    check(lambda a, b: torch._weight_norm_interface(a, b, 0), v, gain, grad=False, rtol=1e-5, atol=1e-6)
    check(
        lambda a, b: torch._weight_norm_interface(a, b, 2),
        v.bfloat16(),
        r(1, 1, 2).bfloat16(),
        grad=False,
        rtol=2e-2,
        atol=2e-2,
    )  # the norms come back in float32, as CPU keeps them


def test_weight_norm_parametrized_conv_trains_like_cpu():
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 3), dim=2)

    def call(x, g0, v, bias):
        params = {"parametrizations.weight.original0": g0, "parametrizations.weight.original1": v, "bias": bias}
        return functional_call(conv, params, (x,))

    w = conv.parametrizations.weight
    check(call, r(2, 3, 8), w.original0.detach(), w.original1.detach(), conv.bias.detach(), rtol=1e-4, atol=1e-5)
