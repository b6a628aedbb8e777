"""torch.optim on tpu: the _foreach_ path (the default) and fused=True are lowered, each call one program, match
CPU, and a changing learning rate or step count never recompiles."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_tpu

OPTIMIZERS = {
    "sgd": lambda p, **kw: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, **kw),
    "adam_amsgrad": lambda p, **kw: torch.optim.Adam(p, lr=1e-2, amsgrad=True, weight_decay=0.01, **kw),
    "adamw": lambda p, **kw: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, **kw),
}


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))


def _train(device: str, make_opt, steps: int = 3, **kw) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = _model().to(device)
    opt = make_opt(model.parameters(), **kw)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(1)).to(device)
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        sched.step()
    return [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_cpu_without_fallback(name, fused):
    kw = {"fused": True} if fused else {}  # fused=False would also turn the default foreach path off
    torch_tpu.reset_op_counts()
    tpu = _train("tpu", OPTIMIZERS[name], **kw)
    assert torch_tpu.metrics()["fallback_ops"] == {}
    lowered = torch_tpu.metrics()["lowered_ops"]
    if fused:
        assert any(k.startswith("aten::_fused_") for k in lowered), lowered
    else:
        assert any(k.startswith("aten::_foreach_") for k in lowered), lowered
    cpu = _train("cpu", OPTIMIZERS[name], **kw)
    for a, b in zip(tpu, cpu, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _many_params(n: int = 30) -> list[nn.Parameter]:
    g = torch.Generator().manual_seed(2)
    params = [nn.Parameter(torch.randn(4, 3, generator=g).to("tpu")) for _ in range(n)]
    for p in params:
        p.grad = torch.randn(4, 3, generator=g).to("tpu")
    return params


def test_adamw_step_over_30_params_is_a_handful_of_executions():
    params = _many_params()
    opt = torch.optim.AdamW(params, lr=1e-3)
    with torch_tpu.eager_mode("strict"):
        opt.step()  # first step creates the state
        torch.tpu.synchronize()
        before = torch_tpu.metrics()["executions"]
        opt.step()
        torch.tpu.synchronize()
        strict = torch_tpu.metrics()["executions"] - before
    with torch_tpu.eager_mode("fused"):
        before = torch_tpu.metrics()["executions"]
        opt.step()
        torch.tpu.synchronize()
        fused = torch_tpu.metrics()["executions"] - before
    assert strict <= 12, strict  # one program per _foreach_ call, not per parameter
    assert fused == 1, fused


def test_changing_learning_rate_compiles_nothing_and_keeps_meta_cache_bounded():
    params = _many_params(4)
    opt = torch.optim.AdamW(params, lr=1e-3, fused=True)
    for _ in range(3):  # warm-up steps, each a step boundary as in the loop below
        opt.step()
        torch.tpu.synchronize()
    compiles = torch_tpu.metrics()["compiles"]
    for step in range(20):
        for group in opt.param_groups:
            group["lr"] = 1e-3 / (step + 1)
        opt.step()
        torch.tpu.synchronize()  # a step boundary, as a loss read would be (fused mode runs one graph per step)
    assert torch_tpu.metrics()["compiles"] == compiles


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_adam_per_parameter_step_sizes_reuse_meta_results(mode):
    """The foreach Adam passes per-parameter step sizes as a ScalarList whose values change every step; they are
    program arguments, so steady-state steps run no meta kernel (a cache keyed by their values missed every step and
    grew without bound) and compile nothing, and the parameters still match the CPU's."""

    def run(device: str) -> tuple[list[torch.Tensor], int, int]:
        torch.manual_seed(0)
        model = _model().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)  # the default foreach path
        x = torch.randn(8, 6, generator=torch.Generator().manual_seed(1)).to(device)
        meta = compiles = 0
        for step in range(6):
            if step == 3:
                meta, compiles = torch_tpu.metrics()["meta_calls"], torch_tpu.metrics()["compiles"]
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            opt.param_groups[0]["lr"] = 1e-2 / (step + 2)
        params = [p.detach().cpu() for p in model.parameters()]
        m = torch_tpu.metrics()
        return params, m["meta_calls"] - meta, m["compiles"] - compiles

    with torch_tpu.eager_mode(mode):
        got, meta_calls, compiles = run("tpu")
    want, _, _ = run("cpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert meta_calls == 0
    assert compiles == 0
