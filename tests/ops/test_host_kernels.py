"""With TORCH_TPU_HOST_KERNELS=1 on XLA-CPU, float32/float64 matrix products and plain convolutions are torch's own
CPU kernels, called from the compiled program through XLA FFI custom calls (backend/host_kernels.cpp). Checked
against CPU PyTorch (bit for bit where PyTorch makes the same single kernel call) and by the program text:
transposed operands are read in place."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from tests.ops.harness import dumped_programs
from torch_tpu import _C, runtime

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ON_XLA_CPU = runtime.get().client.platform_name == "cpu"
pytestmark = pytest.mark.skipif(not ON_XLA_CPU, reason="the host kernels exist on the XLA-CPU plugin only")


@pytest.fixture(autouse=True)
def host_kernels_for_small_shapes():
    """Turns the host kernels on (they are opt-in: TORCH_TPU_HOST_KERNELS=1) down to the smallest shapes, which stay
    XLA's below 2^25 multiply-adds. The tests use shapes no other test compiles, so no graph recorded with the other
    lowering is reused, and restore both settings."""
    was_on = _C._host_kernels()
    assert _C._enable_host_kernels(runtime.get().client), "the XLA-CPU plugin refused the FFI handlers"
    previous = _C._set_host_kernel_min_macs(0)
    yield
    _C._set_host_kernel_min_macs(previous)
    _C._set_host_kernels(was_on)


# (name, product, shape of a, shape of b): one GEMM call in CPU PyTorch, so the numbers must be identical.
SINGLE_GEMM = [
    ("nn", lambda a, b: a @ b, (37, 19), (19, 23)),
    ("nt", lambda a, b: a @ b.t(), (37, 19), (23, 19)),
    ("tn", lambda a, b: a.t() @ b, (19, 37), (19, 23)),
    ("tt", lambda a, b: a.t() @ b.t(), (19, 37), (23, 19)),
    ("bmm_nt", lambda a, b: a @ b.transpose(1, 2), (3, 37, 19), (3, 23, 19)),
    ("bmm_tn", lambda a, b: torch.bmm(a.transpose(1, 2), b), (3, 19, 37), (3, 19, 23)),
    ("large", lambda a, b: a @ b.t(), (300, 256), (700, 256)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("name", "fn", "sa", "sb"), SINGLE_GEMM, ids=[c[0] for c in SINGLE_GEMM])
def test_products_match_cpu_bit_for_bit(name, fn, sa, sb, dtype):
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(sa, generator=g, dtype=dtype), torch.randn(sb, generator=g, dtype=dtype)
    got = fn(a.to("tpu"), b.to("tpu")).cpu()
    assert torch.equal(got, fn(a, b)), (got - fn(a, b)).abs().max()


def test_special_values_and_empty_shapes_follow_cpu():
    a = torch.tensor([[1.0, float("inf")], [float("nan"), 2.0], [0.0, -1.0]])
    b = torch.tensor([[0.0, 1.0], [3.0, float("-inf")]])
    torch.testing.assert_close((a.to("tpu") @ b.to("tpu")).cpu(), a @ b, equal_nan=True)
    for sa, sb in [((0, 5), (5, 4)), ((3, 0), (0, 4)), ((3, 5), (5, 0))]:
        x, y = torch.randn(sa), torch.randn(sb)
        assert torch.equal((x.to("tpu") @ y.to("tpu")).cpu(), x @ y)


def test_linear_layer_forward_and_backward_match_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.GELU(), torch.nn.Linear(96, 24))
    tpu = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.GELU(), torch.nn.Linear(96, 24))
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    x = torch.randn(4, 10, 48)
    y_cpu, y_tpu = cpu(x), tpu(x.to("tpu"))
    torch.testing.assert_close(y_tpu.cpu(), y_cpu, rtol=1e-5, atol=1e-5)
    y_cpu.square().sum().backward()
    y_tpu.square().sum().backward()
    for p_cpu, p_tpu in zip(cpu.parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(p_tpu.grad.cpu(), p_cpu.grad, rtol=1e-4, atol=1e-4)


def test_transposed_operands_are_read_in_place(tmp_path):
    a, w = torch.randn(41, 29, device="tpu"), torch.randn(31, 29, device="tpu")
    h = torch.randn(41, 29, device="tpu", dtype=torch.bfloat16)
    with dumped_programs(tmp_path) as programs:
        F.linear(a, w).cpu()
        (h @ h.t()).cpu()
    text = "\n".join(programs)
    assert '"torch_tpu.gemm_nt"' in text  # the weight is read transposed by the GEMM ...
    f32 = [p for p in programs if "torch_tpu.gemm" in p]
    assert f32 and all("stablehlo.dot_general" not in p for p in f32)  # ... which is the only product
    assert any("stablehlo.dot_general" in p and "bf16" in p for p in programs)  # bfloat16 keeps XLA's dot


def test_attention_products_call_the_host_gemm(tmp_path):
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 7, 8, generator=g, requires_grad=True) for _ in range(3))
    qt, kt, vt = (t.detach().to("tpu").requires_grad_() for t in (q, k, v))
    with dumped_programs(tmp_path) as programs:
        out_t = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        out_t.square().sum().backward()
        grads_t = [t.grad.cpu() for t in (qt, kt, vt)]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.square().sum().backward()
    torch.testing.assert_close(out_t.cpu(), out, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads_t, (q.grad, k.grad, v.grad), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    text = "\n".join(programs)
    assert text.count("torch_tpu.gemm_") >= 6  # QKᵀ and PV forward, four products backward
    assert "stablehlo.dot_general" not in text


# (conv, input shape, weight shape, stride, padding, dilation, groups)
CONVS = [
    (F.conv2d, (2, 4, 9, 9), (6, 4, 3, 3), 1, 1, 1, 1),
    (F.conv2d, (2, 4, 10, 9), (6, 2, 3, 3), 2, 1, 1, 2),
    (F.conv2d, (1, 3, 12, 12), (5, 3, 3, 2), 1, 0, 2, 1),
    (F.conv1d, (2, 4, 11), (6, 4, 3), 1, 1, 1, 1),
    (F.conv3d, (1, 2, 5, 6, 7), (3, 2, 3, 3, 3), 1, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CONVS, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CONVS)])
def test_convolutions_and_their_gradients_match_cpu_bit_for_bit(case, dtype):
    conv, xs, ws, stride, padding, dilation, groups = case
    g = torch.Generator().manual_seed(3)
    x = torch.randn(xs, generator=g, dtype=dtype, requires_grad=True)
    w = torch.randn(ws, generator=g, dtype=dtype, requires_grad=True)
    xt, wt = (t.detach().to("tpu").requires_grad_() for t in (x, w))
    y, yt = conv(x, w, None, stride, padding, dilation, groups), conv(xt, wt, None, stride, padding, dilation, groups)
    seed = torch.randn(y.shape, generator=g, dtype=dtype)
    y.backward(seed)
    yt.backward(seed.to("tpu"))
    assert torch.equal(yt.cpu(), y)
    assert torch.equal(xt.grad.cpu(), x.grad)
    assert torch.equal(wt.grad.cpu(), w.grad)


def test_convolution_programs_call_the_host_kernels(tmp_path):
    x = torch.randn(1, 3, 13, 11, device="tpu", requires_grad=True)
    w = torch.randn(4, 3, 3, 3, device="tpu", requires_grad=True)
    with dumped_programs(tmp_path) as programs:
        F.conv2d(x, w, padding=1).sum().backward()
        F.conv_transpose2d(x.detach(), w.detach().transpose(0, 1)).cpu()  # transposed: XLA's convolution stays
        x.grad.cpu()
    text = "\n".join(programs)
    for target in ("torch_tpu.conv", "torch_tpu.conv_input_grad", "torch_tpu.conv_weight_grad"):
        assert f'"{target}"' in text
    assert "stablehlo.convolution" in text


def test_small_products_stay_xla_dots(tmp_path):
    _C._set_host_kernel_min_macs(1 << 25)
    a, w = torch.randn(43, 29, device="tpu"), torch.randn(31, 29, device="tpu")
    big_a, big_w = torch.randn(512, 256, device="tpu"), torch.randn(257, 256, device="tpu")
    with dumped_programs(tmp_path) as programs:
        F.linear(a, w).cpu()
        F.linear(big_a, big_w).cpu()  # 512 * 256 * 257 multiply-adds: over the limit
    small = [p for p in programs if "43x29" in p]
    big = [p for p in programs if "512x256" in p]
    assert small and all("stablehlo.dot_general" in p and "torch_tpu.gemm" not in p for p in small)
    assert big and all('"torch_tpu.gemm_nt"' in p for p in big)


@pytest.mark.parametrize(("env", "expected"), [("1", "True"), ("0", "False")])
def test_env_switch(env, expected):
    code = (
        "import torch, torch_tpu\nfrom torch_tpu import _C\n"
        "a, b = torch.randn(600, 256), torch.randn(300, 256)\n"
        "got = (a.to('tpu') @ b.to('tpu').t()).cpu()\n"
        "print(_C._host_kernels(), torch.allclose(got, a @ b.t(), rtol=1e-4, atol=1e-4))\n"
    )
    env_vars = {**os.environ, "PYTHONPATH": REPO, "TORCH_TPU_HOST_KERNELS": env}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env_vars, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].split() == [expected, "True"], (proc.stdout, proc.stderr)
