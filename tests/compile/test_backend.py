"""torch.compile on tpu: the "tpu" backend, the default backend routed to it for tpu graphs, torch_tpu's Dynamo
DeviceInterface, one program per call, parameters as program arguments, input mutation and output aliasing."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.device_interface import get_interface_for_device
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from torch_tpu.compile.device_interface import TpuDeviceInterface


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ y) * 2 + y.sum(0)


def test_backend_registered() -> None:
    assert "tpu" in torch._dynamo.list_backends()


def test_device_interface_is_ours() -> None:
    iface = get_interface_for_device("tpu")
    assert iface is TpuDeviceInterface
    assert get_interface_for_device(torch.device("tpu:0")) is TpuDeviceInterface
    assert iface.device_count() == torch.tpu.device_count()
    assert iface.current_device() == torch.tpu.current_device()
    assert iface.is_available()
    assert iface.is_dtype_supported(torch.float64) and iface.is_dtype_supported(torch.float16)


@pytest.mark.parametrize("backend", ["tpu", None, "inductor"])
def test_compile_matches_eager_one_execution_per_call(backend: str | None, delta) -> None:
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    compiled = torch.compile(f) if backend is None else torch.compile(f, backend=backend)
    xt, yt = x.to("tpu"), y.to("tpu")
    torch.testing.assert_close(compiled(xt, yt).cpu(), f(x, y))
    d = delta()
    assert d["compiled_graphs"] == 1 and d["fallbacks"] == 0
    outs = [compiled(xt, yt) for _ in range(10)]
    d = delta()
    assert d["executions"] == 10  # one program per call (debug mode outside)
    assert d["compiles"] == 0 and d["cache_misses"] == 0 and d["dynamo_recompiles"] == 0
    assert d["compiled_calls"] == 10
    torch.testing.assert_close(outs[-1].cpu(), f(x, y))


def test_fullgraph(delta) -> None:
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    out = torch.compile(f, backend="tpu", fullgraph=True)(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x, y))

    def breaks(x: torch.Tensor) -> torch.Tensor:
        print("graph break")
        return x + 1

    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(breaks, backend="tpu", fullgraph=True)(x.to("tpu"))


def test_cpu_tensors_still_go_to_inductor(delta) -> None:
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    torch.testing.assert_close(torch.compile(f)(x, y), f(x, y))
    d = delta()
    assert d["compiled_graphs"] == 0 and d["executions"] == 0


def test_fake_tensors_on_tpu() -> None:
    with FakeTensorMode():
        t = torch.empty(3, 4, device="tpu")
        assert isinstance(t, FakeTensor) and t.device == torch.device("tpu:0")
        assert (t @ t.T).device.type == "tpu"
    seen: list[torch.Tensor] = []

    def spy(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        seen.extend(example_inputs)
        return gm.forward

    from torch._dynamo.backends.common import aot_autograd

    torch.compile(lambda a: a.sin() + 1, backend=aot_autograd(fw_compiler=spy))(torch.randn(3, device="tpu"))
    assert seen and all(isinstance(t, FakeTensor) and t.device == torch.device("tpu:0") for t in seen)


def test_parameters_are_program_arguments(delta) -> None:
    torch.manual_seed(0)
    lin = nn.Linear(6, 3)
    lin_t = nn.Linear(6, 3).to("tpu")
    lin_t.load_state_dict(lin.state_dict())
    compiled = torch.compile(lin_t, backend="tpu")
    x = torch.randn(5, 6)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), lin(x))
        delta()
        lin.weight.mul_(3)
        lin_t.weight.mul_(3)  # a new value, same program: nothing was baked in
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), lin(x))
    d = delta()
    assert d["compiled_graphs"] == 0 and d["dynamo_recompiles"] == 0


def test_input_mutation_and_output_alias() -> None:
    def g(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a.add_(b)
        return a.view(-1), b * 2

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    at, bt = a.to("tpu"), b.to("tpu")
    expected = g(a, b)
    out = torch.compile(g, backend="tpu")(at, bt)
    torch.testing.assert_close(at.cpu(), a)  # the input was updated in place
    torch.testing.assert_close(out[0].cpu(), expected[0])
    torch.testing.assert_close(out[1].cpu(), expected[1])
    assert out[0].data_ptr() == at.data_ptr()  # the view output aliases the input, as in eager
    at.zero_()
    assert out[0].abs().sum().item() == 0


def test_mutated_buffer_in_inference(delta) -> None:
    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total.add_(x.sum(0))
            return x * 2

    m = Counter().to("tpu")
    compiled = torch.compile(m, backend="tpu")
    x = torch.randn(3, 4)
    with torch.no_grad():
        for _ in range(3):
            compiled(x.to("tpu"))
    torch.testing.assert_close(m.total.cpu(), x.sum(0) * 3)
    assert delta()["fallbacks"] == 0
