"""Dynamo behaviours on tpu: graph breaks (print, .item() control flow), guards and recompiles (counted in
torch_tpu.metrics()), the default device, autocast regions."""

from __future__ import annotations

import pytest
import torch


def test_graph_break_print(capsys, delta) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        print("between graphs")
        return y.cos() * 2

    x = torch.randn(5)
    out = torch.compile(f, backend="tpu")(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x))
    assert "between graphs" in capsys.readouterr().out
    d = delta()
    assert d["compiled_graphs"] == 2 and d["compiled_calls"] == 2 and d["executions"] == 2


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_item_control_flow(sign: float, delta) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 3
        if y.sum().item() > 0:
            return y + 1
        return y - 1

    x = torch.rand(6) * sign
    compiled = torch.compile(f, backend="tpu")
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))
    assert delta()["compiled_graphs"] >= 2  # the graph before .item(), then the taken branch


def test_recompiles_are_counted(delta) -> None:
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        return x * n

    x = torch.randn(4)
    compiled = torch.compile(f, backend="tpu")
    for n in (1, 2, 3, 4):  # n=2 fails the n==1 guard: one recompile with n dynamic, which then serves 3 and 4
        torch.testing.assert_close(compiled(x.to("tpu"), n).cpu(), x * n)
    d = delta()
    assert d["compiled_graphs"] == 2 and d["dynamo_recompiles"] == 1 and d["compiled_calls"] == 4


def test_shape_guard_recompiles_static(delta) -> None:
    compiled = torch.compile(lambda x: x.exp().sum(0), backend="tpu", dynamic=False)
    for n in (3, 4, 3, 4):
        x = torch.randn(n, 5)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x.exp().sum(0))
    d = delta()
    assert d["compiled_graphs"] == 2 and d["dynamo_recompiles"] == 1


def test_no_recompiles_across_fixed_shape_steps(delta) -> None:
    lin = torch.nn.Linear(4, 4).to("tpu")
    compiled = torch.compile(lin, backend="tpu")
    x = torch.randn(2, 4, device="tpu")
    for _ in range(10):
        compiled(x).sum().backward()
    d = delta()
    assert d["compiled_graphs"] == 1 and d["dynamo_recompiles"] == 0 and d["compiled_backward_calls"] == 10


def test_default_device_tpu(delta) -> None:
    def f(n: int) -> torch.Tensor:
        return torch.ones(n, 3) * torch.arange(3.0)

    torch.set_default_device("tpu")
    try:
        out = torch.compile(f)(4)  # no tensor inputs: the graph's factories produce tpu tensors
    finally:
        torch.set_default_device(None)
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), f(4))
    assert delta()["compiled_graphs"] == 1


def test_autocast_region() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast("tpu", dtype=torch.bfloat16):
            return a @ b

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        eager = (a.to("tpu") @ b.to("tpu")).cpu()
    assert eager.dtype == torch.bfloat16  # autocast casts matmuls on tpu as on CUDA
    out = torch.compile(f, backend="tpu")(a.to("tpu"), b.to("tpu"))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), eager)
