"""Training through torch.compile on tpu: compiled forward and backward (AOTAutograd), the optimizer step eager or
fused; losses, gradients, parameters and BatchNorm running statistics equal CPU eager."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F

import torch_tpu


def _pair(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    return model, copy.deepcopy(model).to("tpu")


def _data(n: int, classes: int, *shape: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)


def _step(model, opt, x, y) -> torch.Tensor:
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def test_mlp_losses_grads_params_match_cpu(delta) -> None:
    torch.manual_seed(0)
    cpu, tpu = _pair(nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)))
    compiled = torch.compile(tpu, backend="tpu")
    opt_c, opt_t = torch.optim.SGD(cpu.parameters(), lr=0.1), torch.optim.SGD(tpu.parameters(), lr=0.1)
    x, y = _data(16, 4, 8)
    for _ in range(4):
        expected = _step(cpu, opt_c, x, y)
        got = _step(compiled, opt_t, x.to("tpu"), y.to("tpu"))
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-6)
        for p, q in zip(cpu.parameters(), tpu.parameters(), strict=True):
            torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-6)
    for p, q in zip(cpu.parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-6)
    d = delta()
    assert d["compiled_graphs"] == 1 and d["dynamo_recompiles"] == 0
    assert d["aot_backward_graphs"] == 1 and d["compiled_backward_calls"] == 4 and d["compiled_calls"] == 4
    assert d["fallbacks"] == 0


def test_batchnorm_running_stats_then_eval(delta) -> None:
    torch.manual_seed(0)
    cpu, tpu = _pair(
        nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 5))
    )
    compiled = torch.compile(tpu, backend="tpu")
    opt_c, opt_t = torch.optim.SGD(cpu.parameters(), lr=0.05), torch.optim.SGD(tpu.parameters(), lr=0.05)
    x, y = _data(6, 5, 3, 8, 8)
    for _ in range(3):
        torch.testing.assert_close(
            _step(compiled, opt_t, x.to("tpu"), y.to("tpu")).cpu(), _step(cpu, opt_c, x, y), rtol=1e-5, atol=1e-6
        )
    bn_c, bn_t = cpu[1], tpu[1]
    torch.testing.assert_close(bn_t.running_mean.cpu(), bn_c.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn_t.running_var.cpu(), bn_c.running_var, rtol=1e-5, atol=1e-6)
    assert int(bn_t.num_batches_tracked.item()) == 3
    assert delta()["fallbacks"] == 0
    cpu.eval()
    tpu.eval()  # module.training is guarded: a recompile, with the running statistics as inputs
    with torch.no_grad():
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), cpu(x), rtol=1e-4, atol=1e-5)
    d = delta()
    assert d["dynamo_recompiles"] == 1 and d["fallbacks"] == 0


def _mlp_steps(delta, steps: int) -> dict[str, int]:
    """`steps` AdamW steps of a compiled MLP in fused mode, each loss equal to CPU eager's; the counters' change
    after the first two steps (they compile: AdamW's first step differs, its state is created)."""
    torch.manual_seed(0)
    cpu, tpu = _pair(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)))
    compiled = torch.compile(tpu, backend="tpu")
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_t = torch.optim.AdamW(tpu.parameters(), lr=1e-2)
    x, y = _data(12, 3, 8)
    xt, yt = x.to("tpu"), y.to("tpu")
    with torch_tpu.eager_mode("fused"):
        for step in range(steps):
            expected = _step(cpu, opt_c, x, y)
            got = _step(compiled, opt_t, xt, yt).item()
            assert abs(got - expected.item()) < 1e-4
            if step == 2:
                delta()
    for p, q in zip(cpu.parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-6)
    return delta()


def test_fused_step_replays_compiled_graphs(delta) -> None:
    """After warm-up the compiled forward and backward run from their captures (one execution each, no op
    dispatched); the loss and the optimizer step are fused eager. Fixed shapes never recompile."""
    d = _mlp_steps(delta, 12)
    measured = 12 - 3  # _mlp_steps counts from the end of step 2 (steps 0-2 compile and capture)
    # each step replays two captured graphs: the compiled forward and the compiled backward
    assert d["replayed_calls"] == 2 * measured and d["graph_replays"] == 2 * measured and d["captured_graphs"] == 0
    assert d["refused_captures"] == 0
    # per step: forward, loss + its backward, compiled backward, optimizer step (+ loss read)
    assert d["executions"] == 4 * measured and d["compiles"] == 0 and d["cache_misses"] == 0
    assert d["dynamo_recompiles"] == 0 and d["compiled_graphs"] == 0 and d["fallbacks"] == 0


def test_fused_step_is_one_program_without_replay(delta, no_replay) -> None:
    """With replay off the compiled forward and the compiled backward are recorded into one fused graph, cut as the
    optimizer step starts; the step is the second program of each step."""
    d = _mlp_steps(delta, 12)
    measured = 12 - 3  # counted from the end of step 2
    # per step: the forward and backward in one fused graph, the optimizer step in another
    assert (
        d["executions"] == 2 * measured and d["compiles"] == 0 and d["cache_misses"] == 0 and d["replayed_calls"] == 0
    )
    assert d["dynamo_recompiles"] == 0 and d["compiled_graphs"] == 0 and d["fallbacks"] == 0


def test_batchnorm_step_hits_the_structural_cache(delta) -> None:
    """BatchNorm's buffer updates are in-graph copies (rewritten onto lowered ops): the forward that makes them is
    captured and replayed with the running statistics as updated inputs, and the loss and optimizer graphs are found
    by the engine's structural cache (nothing lowered or printed) from the third step on."""
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 3)]
    cpu, tpu = _pair(nn.Sequential(*layers))
    compiled = torch.compile(tpu, backend="tpu")
    opt_c, opt_t = torch.optim.SGD(cpu.parameters(), lr=0.05), torch.optim.SGD(tpu.parameters(), lr=0.05)
    x, y = _data(4, 3, 3, 8, 8)
    with torch_tpu.eager_mode("fused"):
        for step in range(6):
            got = _step(compiled, opt_t, x.to("tpu"), y.to("tpu")).item()
            assert abs(got - _step(cpu, opt_c, x, y).item()) < 1e-4
            if step == 1:
                delta()
    d = delta()
    measured = 6 - 2  # counted from the end of step 1
    # per step: forward (updating the running statistics) and backward replayed (2), the loss and SGD graphs found
    # by the structural cache (2): four executions
    assert d["replayed_calls"] == 2 * measured and d["graph_cache_hits"] == 2 * measured
    assert d["executions"] == 4 * measured
    assert d["compiles"] == 0 and d["fallbacks"] == 0
    torch.testing.assert_close(tpu[1].running_mean.cpu(), cpu[1].running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tpu[1].running_var.cpu(), cpu[1].running_var, rtol=1e-5, atol=1e-6)
    assert int(tpu[1].num_batches_tracked.item()) == 6


class _PadScatter(nn.Module):
    """F.pad (constant, one side cropping) and torch.diagonal_scatter: PyTorch's references for both write into a
    view (prims.copy_to), which AOTAutograd refuses; the backend keeps them whole."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.pad(self.proj(x), (1, -2), value=0.5)  # [n, 5]
        square = h[:, :5].reshape(-1, 5, 1) * h[:, None, :5]
        return torch.diagonal_scatter(square, h.tanh(), dim1=1, dim2=2).flatten(1)


def test_pad_and_diagonal_scatter_train_like_cpu(delta) -> None:
    torch.manual_seed(0)
    cpu, tpu = _pair(nn.Sequential(_PadScatter(), nn.Linear(25, 3)))
    compiled = torch.compile(tpu, backend="tpu")
    opt_c, opt_t = torch.optim.SGD(cpu.parameters(), lr=0.05), torch.optim.SGD(tpu.parameters(), lr=0.05)
    x, y = _data(4, 3, 6)
    for _ in range(3):
        expected = _step(cpu, opt_c, x, y)
        torch.testing.assert_close(_step(compiled, opt_t, x.to("tpu"), y.to("tpu")).cpu(), expected)
    for p, q in zip(cpu.parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-6)
    d = delta()
    assert d["compiled_graphs"] == 1 and d["aot_backward_graphs"] == 1 and d["fallbacks"] == 0
