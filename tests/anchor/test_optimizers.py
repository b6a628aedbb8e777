"""torch.tpu.optimizers (TorchTPU's functional optimizers and SingleTraceTrainer) against references: torch.optim's
AdamW and SGD on CPU, torch.optim.Muon and a float64 Muon written here, and eager CPU training for the trainer."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import torch_tpu  # noqa: F401  (registers the tpu device and torch.tpu)
from torch_tpu._internal import optimizers as impl

DEVICES = ["cpu", "tpu"]
STEPS = 4


def _params(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(6, 4, generator=g), "b": torch.randn(4, generator=g)}


def _grads(params: dict[str, torch.Tensor], steps: int, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{k: torch.randn(v.shape, generator=g) for k, v in params.items()} for _ in range(steps)]


def _run_torch(opt_cls: type, params: dict[str, torch.Tensor], grads: list[dict[str, torch.Tensor]], **kw) -> tuple:
    ref = {k: v.clone().requires_grad_() for k, v in params.items()}
    opt = opt_cls(list(ref.values()), **kw)
    for g in grads:
        for k, p in ref.items():
            p.grad = g[k].clone()
        opt.step()
    return {k: v.detach() for k, v in ref.items()}, opt


def _run_ours(opt: impl.Optimizer, params: dict[str, torch.Tensor], grads: list, device: str) -> object:
    group = opt.init_param_group({k: v.clone().to(device) for k, v in params.items()})  # keep `params`
    for g in grads:
        out = opt.step(group, {k: v.to(device) for k, v in g.items()})
        assert out is group  # updated in place and returned
    return group


def test_public_module_serves_the_implementations() -> None:
    import torch_tpu._internal.optimizers.adamw as adamw_mod

    assert torch.tpu.optimizers.AdamW is impl.AdamW is adamw_mod.AdamW
    assert set(dir(torch.tpu.optimizers)) == {"Optimizer", "AdamW", "Sgd", "Muon", "SingleTraceTrainer"}
    for cls in (impl.AdamW, impl.Sgd, impl.Muon):
        assert issubclass(cls, torch.tpu.optimizers.Optimizer)


def test_defaults_match_torchtpu_and_are_read_only() -> None:
    d = impl.AdamW().defaults
    assert (d["lr"], d["weight_decay"], d["beta1"], d["beta2"], d["eps"]) == (1e-3, 1e-2, 0.9, 0.999, 1e-8)
    assert d["use_bfloat16_moments"] is True and d["capturable"] is True
    with pytest.raises(TypeError):
        d["lr"] = 1.0  # type: ignore[index]
    s = impl.Sgd().defaults
    assert (s["lr"], s["momentum"], s["dampening"], s["nesterov"], s["fused"]) == (1e-3, 0.0, 0.0, False, True)
    m = impl.Muon().defaults
    assert (m["lr"], m["weight_decay"], m["momentum"], m["nesterov"], m["ns_steps"]) == (1e-3, 0.1, 0.95, True, 5)
    assert m["ns_coefficients"] == (3.4445, -4.7750, 2.0315) and m["eps"] == 1e-7
    assert m["use_bfloat16_moments"] is False


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("maximize", [False, True])
def test_adamw_matches_torch_optim_adamw(device: str, maximize: bool) -> None:
    params, grads = _params(), _grads(_params(), STEPS)
    kw = dict(lr=1e-2, weight_decay=0.1, eps=1e-8, maximize=maximize)
    ref, ref_opt = _run_torch(torch.optim.AdamW, params, grads, betas=(0.9, 0.99), **kw)
    opt = impl.AdamW(beta1=0.9, beta2=0.99, use_bfloat16_moments=False, **kw)
    group = _run_ours(opt, params, grads, device)
    for i, k in enumerate(params):
        p = group.params[k]
        assert p.device.type == device and p.dtype == torch.float32
        torch.testing.assert_close(p.cpu(), ref[k], rtol=1e-5, atol=1e-6)
        state = ref_opt.state[ref_opt.param_groups[0]["params"][i]]
        torch.testing.assert_close(group.opt_state_m[k].cpu(), state["exp_avg"], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(group.opt_state_v[k].cpu(), state["exp_avg_sq"], rtol=1e-5, atol=1e-8)
        assert group.opt_steps[k].item() == STEPS


@pytest.mark.parametrize("device", DEVICES)
def test_adamw_bfloat16_moments_stay_bf16_and_close_to_fp32(device: str) -> None:
    params, grads = _params(), _grads(_params(), STEPS)
    ref, ref_opt = _run_torch(torch.optim.AdamW, params, grads, lr=1e-2, weight_decay=0.1)
    group = _run_ours(impl.AdamW(lr=1e-2, weight_decay=0.1), params, grads, device)  # bf16 moments by default
    for i, k in enumerate(params):
        assert group.opt_state_m[k].dtype == torch.bfloat16 and group.opt_state_v[k].dtype == torch.bfloat16
        assert group.params[k].dtype == torch.float32
        state = ref_opt.state[ref_opt.param_groups[0]["params"][i]]
        # bf16 keeps 8 significant bits: each step's rounding errs by up to 2^-9 of the moment's magnitude, and the
        # errors add up over the steps (elements near zero after cancellation have no relative bound, hence atol).
        for ours, theirs in ((group.opt_state_m[k], state["exp_avg"]), (group.opt_state_v[k], state["exp_avg_sq"])):
            bound = STEPS * 2**-9 * theirs.abs().max().item()
            torch.testing.assert_close(ours.float().cpu(), theirs, rtol=0, atol=bound)
        # Each step moves a parameter by ~lr; rounding the moments perturbs that by well under 1% of lr per step.
        moved = (ref[k] - params[k]).abs().max().item()
        assert moved > 1e-2
        torch.testing.assert_close(group.params[k].cpu(), ref[k], rtol=0, atol=STEPS * 1e-2 * 1e-2)


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02),
    dict(lr=0.1, momentum=0.5, maximize=True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", SGD_CASES, ids=["plain", "momentum-dampening-wd", "nesterov-wd", "maximize"])
def test_sgd_matches_torch_optim_sgd(device: str, kw: dict) -> None:
    params, grads = _params(), _grads(_params(), STEPS)
    ref, ref_opt = _run_torch(torch.optim.SGD, params, grads, **kw)
    group = _run_ours(impl.Sgd(**kw), params, grads, device)
    for i, k in enumerate(params):
        torch.testing.assert_close(group.params[k].cpu(), ref[k], rtol=1e-6, atol=1e-6)
        assert group.opt_steps[k].item() == 1 + STEPS
        if kw.get("momentum", 0.0):
            state = ref_opt.state[ref_opt.param_groups[0]["params"][i]]
            torch.testing.assert_close(group.opt_state_m[k].cpu(), state["momentum_buffer"], rtol=1e-6, atol=1e-6)
    assert bool(group.opt_state_m) == bool(kw.get("momentum", 0.0))  # no buffers without momentum


def _muon_reference(
    p0: torch.Tensor, grads: list[torch.Tensor], lr: float, wd: float, mu: float, nesterov: bool
) -> torch.Tensor:
    """Muon in float64, from its definition: momentum, Newton-Schulz (5 quintic steps, a/b/c as published by
    Keller Jordan), weight decay, learning rate scaled by sqrt(max(1, rows/cols))."""
    a, b, c = 3.4445, -4.7750, 2.0315
    p = p0.double().clone()
    buf = torch.zeros_like(p)
    for g in grads:
        g = g.double()
        buf = mu * buf + (1 - mu) * g
        u = (1 - mu) * g + mu * buf if nesterov else buf
        x = u.T if u.shape[0] > u.shape[1] else u
        x = x / max(torch.linalg.matrix_norm(x).item(), 1e-7)
        for _ in range(5):
            gram = x @ x.T
            x = a * x + (b * gram + c * gram @ gram) @ x
        x = x.T if u.shape[0] > u.shape[1] else x
        p = p * (1 - lr * wd) - lr * math.sqrt(max(1.0, p.shape[0] / p.shape[1])) * x
    return p


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("shape", [(8, 4), (4, 8)], ids=["tall", "wide"])
def test_muon_matches_float64_reference_and_torch_muon(device: str, nesterov: bool, shape: tuple[int, int]) -> None:
    gen = torch.Generator().manual_seed(3)
    p0 = torch.randn(shape, generator=gen)
    grads = [torch.randn(shape, generator=gen) for _ in range(3)]
    kw = dict(lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov)
    opt = impl.Muon(**kw)
    group = _run_ours(opt, {"w": p0}, [{"w": g} for g in grads], device)
    ours = group.params["w"].cpu()
    expected = _muon_reference(p0, grads, 0.02, 0.1, 0.9, nesterov)
    # The Newton-Schulz iteration runs in bfloat16 (as TorchTPU's and torch's): the parameter's total move agrees
    # with the float64 one to a few percent.
    move, ref_move = ours.double() - p0.double(), expected - p0.double()
    assert ref_move.norm() > 0.05
    assert (move - ref_move).norm() / ref_move.norm() < 0.03
    # torch.optim.Muon does the same arithmetic, bf16 included: agreement to float32 rounding of the parameters.
    torch_ref, _ = _run_torch(torch.optim.Muon, {"w": p0}, [{"w": g} for g in grads], **kw)
    torch.testing.assert_close(ours, torch_ref["w"], rtol=0, atol=1e-5)
    assert group.opt_steps["w"].item() == 1 + 3


def test_muon_bfloat16_moments_and_2d_only() -> None:
    group = impl.Muon(use_bfloat16_moments=True).init_param_group({"w": torch.zeros(3, 2, device="tpu")})
    assert group.opt_state_m["w"].dtype == torch.bfloat16
    opt = impl.Muon()
    bias = opt.init_param_group({"b": torch.zeros(3)})
    with pytest.raises(ValueError, match="2-D"):
        opt.step(bias, {"b": torch.ones(3)})


def test_adjusted_learning_rates() -> None:
    from torch_tpu._internal.optimizers.muon import adjusted_lr

    shape = torch.Size([8, 2])
    assert adjusted_lr(0.1, None, shape) == pytest.approx(0.2)
    assert adjusted_lr(0.1, "original", torch.Size([2, 8])) == pytest.approx(0.1)
    assert adjusted_lr(0.1, "match_rms_adamw", shape) == pytest.approx(0.1 * 0.2 * math.sqrt(8))
    assert adjusted_lr(0.1, "spectral_unclamped", torch.Size([2, 8])) == pytest.approx(0.05)


def test_init_param_group_from_module_shares_storage() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2)).to("tpu")
    group = impl.Sgd(lr=1.0).init_param_group(model)
    assert set(group.params) == {"0_weight", "0_bias"}
    before = model[0].bias.detach().cpu().clone()
    impl.Sgd(lr=1.0).step(group, {"0_weight": torch.zeros(2, 3, device="tpu"), "0_bias": torch.ones(2, device="tpu")})
    torch.testing.assert_close(model[0].bias.detach().cpu(), before - 1.0)
    assert impl.AdamW().init_param_group({}).params == {}


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))


def _data(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(7)
    return [(torch.randn(4, 3, generator=gen), torch.randn(4, 2, generator=gen)) for _ in range(n)]


def _eager_losses(model: torch.nn.Module, opt: torch.optim.Optimizer, data: list) -> list[float]:
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _identity_compile(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return gm


@pytest.mark.parametrize(
    "device,compile_fn", [("cpu", _identity_compile), ("tpu", _identity_compile), ("tpu", torch.compile)]
)
@pytest.mark.parametrize("which", ["sgd", "adamw"])
def test_single_trace_trainer_matches_eager_cpu_training(device: str, compile_fn, which: str) -> None:
    data = _data(3)
    ref_model, model = _model(), _model().to(device)
    if which == "sgd":
        ref_opt: torch.optim.Optimizer = torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9)
        opt: impl.Optimizer = impl.Sgd(lr=0.1, momentum=0.9)
    else:
        ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=0.01, weight_decay=0.1)
        opt = impl.AdamW(lr=0.01, weight_decay=0.1, use_bfloat16_moments=False)
    ref_losses = _eager_losses(ref_model, ref_opt, data)
    trainer = impl.SingleTraceTrainer(model, opt, compile_fn=compile_fn)
    step = trainer.make_compiled_train_step(data[0][0].to(device), data[0][1].to(device))
    losses = [step(x.to(device), y.to(device)).item() for x, y in data]
    assert losses == pytest.approx(ref_losses, rel=1e-5)
    for (name, p), (ref_name, ref_p) in zip(model.named_parameters(), ref_model.named_parameters(), strict=True):
        assert name == ref_name and trainer.params[name] is not None
        torch.testing.assert_close(p.detach().cpu(), ref_p.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(trainer.params[name].cpu(), ref_p.detach(), rtol=1e-5, atol=1e-6)


def test_single_trace_trainer_without_optimizer_sets_grads() -> None:
    (x, y), ref_model, model = _data(1)[0], _model(), _model().to("tpu")
    torch.nn.functional.mse_loss(ref_model(x), y).backward()
    trainer = impl.SingleTraceTrainer(model, compile_fn=_identity_compile)
    step = trainer.make_compiled_train_step(x.to("tpu"), y.to("tpu"))
    step(x.to("tpu"), y.to("tpu"))
    for p, ref_p in zip(model.parameters(), ref_model.parameters(), strict=True):
        assert p.grad is not None and p.grad.device.type == "tpu"
        torch.testing.assert_close(p.grad.cpu(), ref_p.grad, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(p.detach().cpu(), ref_p.detach())  # no optimizer: parameters unchanged


def test_single_trace_trainer_compute_loss_fn_and_errors() -> None:
    data = _data(2)
    ref_model, model = _model(), _model().to("tpu")

    def loss_fn(m: torch.nn.Module, args: tuple, kwargs: dict) -> torch.Tensor:
        return m(*args, **kwargs).pow(2).mean()

    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.5)
    ref_losses = []
    for x, _ in data:
        ref_opt.zero_grad()
        loss = loss_fn(ref_model, (x,), {})
        loss.backward()
        ref_opt.step()
        ref_losses.append(loss.item())
    trainer = impl.SingleTraceTrainer(model, impl.Sgd(lr=0.5), compute_loss_fn=loss_fn)
    with pytest.raises(ValueError, match="compile_fn"):
        trainer.make_compiled_train_step(data[0][0].to("tpu"))
    step = trainer.make_compiled_train_step(data[0][0].to("tpu"), compile_fn=_identity_compile)
    assert [step(x.to("tpu")).item() for x, _ in data] == pytest.approx(ref_losses, rel=1e-5)
    with pytest.raises(ValueError, match="targets"):
        step(data[0][0].to("tpu"), data[0][1].to("tpu"))
    for p, ref_p in zip(model.parameters(), copy.deepcopy(ref_model).parameters(), strict=True):
        torch.testing.assert_close(p.detach().cpu(), ref_p.detach(), rtol=1e-5, atol=1e-6)
