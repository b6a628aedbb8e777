"""SDPA on tpu: the device picks its own backend without copying q/k/v to the host, and attention runs as one fused
program forward and one backward, matching the CPU (forward and gradients)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

import torch_tpu

OVERRIDEABLE = 4  # at::SDPBackend::overrideable


def _pair(*shapes: tuple[int, ...], dtype: torch.dtype = torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    cpu = [torch.randn(*s, generator=g).to(dtype).requires_grad_() for s in shapes]
    tpu = [t.detach().to("tpu").requires_grad_() for t in cpu]
    return cpu, tpu


def test_choice_is_made_on_device_without_host_copies():
    q = torch.randn(1, 2, 4, 8, device="tpu")
    before = torch_tpu.metrics()["device_to_host"]
    assert torch._fused_sdp_choice(q, q, q) == OVERRIDEABLE
    assert torch._fused_sdp_choice(q, q, q, dropout_p=0.5) == 0  # math: dropout runs op by op
    assert torch_tpu.metrics()["device_to_host"] == before


@pytest.mark.parametrize(
    ("causal", "mask_kind"), [(False, None), (True, None), (False, "float"), (False, "bool"), (False, "grad")]
)
def test_fused_forward_and_backward_match_cpu(causal, mask_kind):
    (q, k, v), (qt, kt, vt) = _pair((2, 3, 6, 8), (2, 3, 6 if causal else 7, 8), (2, 3, 6 if causal else 7, 4))
    lk = k.shape[2]
    mask = mask_t = None
    if mask_kind == "float" or mask_kind == "grad":
        mask = torch.randn(1, 3, 6, lk, requires_grad=mask_kind == "grad")
        mask_t = mask.detach().to("tpu").requires_grad_(mask_kind == "grad")
    elif mask_kind == "bool":
        mask = torch.rand(2, 1, 6, lk, generator=torch.Generator().manual_seed(1)) > 0.3
        mask[..., 0] = True
        mask_t = mask.to("tpu")
    torch_tpu.reset_op_counts()
    before = torch_tpu.metrics()["executions"]
    out_t = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask_t, is_causal=causal)
    grad = torch.randn(out_t.shape)
    out_t.backward(grad.to("tpu"))
    m = torch_tpu.metrics()
    # One program forward, one backward. A bool mask is first turned into an additive one by PyTorch itself (as for
    # CUDA): zeros_like + logical_not + masked_fill, three small programs.
    assert m["executions"] - before == (5 if mask_kind == "bool" else 2), m["lowered_ops"]
    assert not m["fallback_ops"], m["fallback_ops"]
    assert "isneginf" not in m["lowered_ops"] and "softmax" not in str(m["lowered_ops"])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    out.backward(grad)
    torch.testing.assert_close(out_t.detach().cpu(), out.detach(), atol=1e-5, rtol=1e-5)
    for a, b in ((qt, q), (kt, k), (vt, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-5, rtol=1e-5)
    if mask_kind == "grad":
        torch.testing.assert_close(mask_t.grad.cpu(), mask.grad, atol=1e-5, rtol=1e-5)


def test_scale_and_bfloat16():
    (q, k, v), (qt, kt, vt) = _pair((1, 2, 5, 16), (1, 2, 9, 16), (1, 2, 9, 16), dtype=torch.bfloat16)
    out_t = F.scaled_dot_product_attention(qt, kt, vt, scale=0.3)
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.3)
    assert out_t.dtype == torch.bfloat16
    torch.testing.assert_close(out_t.float().cpu(), out.detach(), atol=2e-2, rtol=2e-2)


def test_grouped_query_attention_is_fused_too():
    (q, k, v), (qt, kt, vt) = _pair((2, 4, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8))
    torch_tpu.reset_op_counts()
    before = torch_tpu.metrics()["executions"]
    out_t = F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    grad = torch.randn(out_t.shape)
    out_t.backward(grad.to("tpu"))
    assert torch_tpu.metrics()["executions"] - before == 2 and not torch_tpu.metrics()["fallback_ops"]
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    out.backward(grad)
    torch.testing.assert_close(out_t.detach().cpu(), out.detach(), atol=1e-5, rtol=1e-5)
    for a, b in ((qt, q), (kt, k), (vt, v)):
        assert a.grad.shape == b.grad.shape
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_three_dim_inputs_fused_and_dropout_on_the_math_path(dropout):
    (q, k, v), (qt, kt, vt) = _pair((3, 5, 8), (3, 6, 8), (3, 6, 8))
    torch_tpu.reset_op_counts()
    before = torch_tpu.metrics()["executions"]
    out_t = F.scaled_dot_product_attention(qt, kt, vt, dropout_p=dropout)
    out_t.sum().backward()
    if dropout == 0.0:
        assert torch_tpu.metrics()["executions"] - before == 2 + 2  # fwd, bwd (+ sum, its backward's expand)
        out = F.scaled_dot_product_attention(q, k, v)
        out.sum().backward()
        torch.testing.assert_close(out_t.detach().cpu(), out.detach(), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(qt.grad.cpu(), q.grad, atol=1e-5, rtol=1e-5)
    else:  # math path, op by op, with the tpu generator's dropout
        assert torch_tpu.metrics()["lowered_ops"]
        assert out_t.shape == (3, 5, 8) and torch.isfinite(qt.grad.cpu()).all()


def test_user_can_disable_the_fused_backend():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    (q, k, v), (qt, kt, vt) = _pair((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8))
    with sdpa_kernel(SDPBackend.MATH):
        torch_tpu.reset_op_counts()
        out_t = F.scaled_dot_product_attention(qt, kt, vt)
        assert torch_tpu.metrics()["lowered_ops"]  # the math path ran op by op
    torch.testing.assert_close(out_t.detach().cpu(), F.scaled_dot_product_attention(q, k, v).detach())
