"""The structural graph cache: recorded ops whose structure was lowered before are not lowered again; a graph whose
structural key is known runs its compiled program directly (graph_cache_hits). Every test checks the results
against CPU PyTorch, since a wrong hit would be a silently wrong answer."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_tpu


def _counts() -> dict[str, int]:
    m = torch_tpu.metrics()
    return {k: m[k] for k in ("graph_cache_hits", "graph_cache_misses", "compiles")}


def _delta(before: dict[str, int]) -> dict[str, int]:
    now = _counts()
    return {k: now[k] - before[k] for k in now}


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_repeated_ops_hit_and_runtime_scalars_stay_out_of_the_key(mode):
    x = torch.randn(7, 5)
    y = torch.randn(7, 5)
    xd, yd = x.to("tpu"), y.to("tpu")
    with torch_tpu.eager_mode(mode):
        for alpha in (0.5, 2.0):  # lowered once (new structure), then recorded
            torch.add(xd, yd, alpha=alpha).cpu()
        before = _counts()
        for alpha in (-3.0, 0.25, 7.5, 1.0):
            torch.testing.assert_close(torch.add(xd, yd, alpha=alpha).cpu(), torch.add(x, y, alpha=alpha))
        d = _delta(before)
    assert d["graph_cache_hits"] == 4 and d["graph_cache_misses"] == 0 and d["compiles"] == 0, d


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_numbers_a_rule_bakes_in_change_the_key(mode):
    x = torch.randn(6, 4) * 3
    xd = x.to("tpu")
    with torch_tpu.eager_mode(mode):
        for slope in (0.01, 0.2, 0.01, 0.5, 0.2):
            got = nn.functional.leaky_relu(xd, slope).cpu()
            torch.testing.assert_close(got, nn.functional.leaky_relu(x, slope))
        for lo, hi in ((-1.0, 1.0), (0.0, 2.0), (-1.0, 1.0)):
            torch.testing.assert_close(xd.clamp(lo, hi).cpu(), x.clamp(lo, hi))


def test_fused_training_steps_run_from_the_cache_with_an_lr_schedule():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))
    x, y = torch.randn(10, 8), torch.randint(0, 4, (10,))

    def train(device: str) -> tuple[list[torch.Tensor], dict[str, int]]:
        model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))
        model.load_state_dict(ref.state_dict())
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
        xd, yd = x.to(device), y.to(device)
        losses, before = [], _counts()
        for step in range(7):
            if step == 3:
                before = _counts()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xd), yd)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.detach())
        out = [v.cpu() for v in losses] + [p.detach().cpu() for p in model.parameters()]
        return out, _delta(before)

    with torch_tpu.eager_mode("fused"):
        got, d = train("tpu")
    want, _ = train("cpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Steps 3..6: the step graph (cut at optimizer.step) and the loss reads come from the cache.
    assert d["graph_cache_misses"] == 0 and d["compiles"] == 0, d
    assert d["graph_cache_hits"] >= 4, d


def test_recorded_op_keeps_the_storage_it_saw():
    """A recorded op reads the tensor as it was: later `.data` swaps, resize_ and CPU scalar updates do not reach it."""
    with torch_tpu.eager_mode("fused"):
        for _ in range(2):  # the second round runs from the cache
            a = torch.arange(6.0, device="tpu")
            step = torch.tensor(2.0)
            b = a * 2
            c = a.add(step)
            a.data = torch.full((6,), 100.0, device="tpu")
            step.fill_(50.0)
            torch.testing.assert_close(b.cpu(), torch.arange(6.0) * 2)
            torch.testing.assert_close(c.cpu(), torch.arange(6.0) + 2)
            torch.testing.assert_close(a.cpu(), torch.full((6,), 100.0))


def test_cached_graph_still_raises_device_checks():
    emb = nn.Embedding(10, 3)
    emb_d = nn.Embedding(10, 3).to("tpu")
    emb_d.load_state_dict(emb.state_dict())
    with torch_tpu.eager_mode("fused"):
        for _ in range(2):
            idx = torch.tensor([1, 4, 9])
            torch.testing.assert_close(emb_d(idx.to("tpu")).cpu(), emb(idx), check_device=False)
        before = _counts()
        with pytest.raises(IndexError, match="index out of range"):
            emb_d(torch.tensor([1, 12, 9], device="tpu")).cpu()
        assert _delta(before)["graph_cache_hits"] >= 1
        torch.testing.assert_close(emb_d(torch.tensor([0, 2, 3], device="tpu")).cpu(), emb(torch.tensor([0, 2, 3])))


def test_dead_intermediates_of_a_cached_graph_are_not_outputs():
    with torch_tpu.eager_mode("fused"):
        x = torch.randn(256, 256, device="tpu")
        for _ in range(3):
            torch.tpu.synchronize()
            torch.tpu.reset_peak_memory_stats()
            base = torch.tpu.memory_allocated()
            y = x
            for _ in range(8):
                y = (y * 1.01).tanh()
            s = y.sum()
            s.cpu()
            # Only x, s and y are device buffers: the 15 temporaries never were.
            assert torch.tpu.max_memory_allocated() - base <= 2 * x.nbytes, torch.tpu.max_memory_allocated() - base
        ref = x.cpu()
        for _ in range(8):
            ref = (ref * 1.01).tanh()
        torch.testing.assert_close(y.cpu(), ref)


def test_storage_resized_under_a_pending_graph_keeps_its_reads():
    """FSDP2 frees and re-allocates parameter storages with untyped_storage().resize_(): ops recorded before that
    must still read the old contents (the resize runs the graph first), and the regrown storage starts afresh."""
    x = torch.randn(8, 16)
    with torch_tpu.eager_mode("fused"):
        xd = x.to("tpu")
        for _ in range(2):  # the second round is recorded without lowering
            y = xd * 2 + 1
            z = xd.t() * 3
            storage = xd.untyped_storage()
            nbytes = storage.nbytes()
            storage.resize_(0)
            torch.testing.assert_close(y.cpu(), x * 2 + 1)
            torch.testing.assert_close(z.cpu(), x.t() * 3)
            storage.resize_(nbytes)
            xd.copy_(x.to("tpu") + 1)
            torch.testing.assert_close(xd.cpu(), x + 1)
            xd.copy_(x.to("tpu"))


def test_fused_graph_with_no_live_results_is_not_lowered_again():
    """A graph whose results all died before it ran has nothing to execute; its structure is still remembered, so
    recording the same ops again is a cache hit, not a second lowering (which cost ~20 us an op)."""
    x, y = torch.randn(16, 16, device="tpu"), torch.randn(16, 16, device="tpu")
    with torch_tpu.eager_mode("fused"):
        executions = torch_tpu.metrics()["executions"]
        for repeat in range(4):  # the first graph lowers ops as they come, the second is lowered and cached
            if repeat == 2:
                before = _counts()
            for _ in range(20):
                (x + y).relu()
            torch.tpu.synchronize()
        d = _delta(before)
        assert torch_tpu.metrics()["executions"] == executions  # dead results never ran
        z = (x + y).relu()  # and a live result still computes
    torch.testing.assert_close(z.cpu(), (x.cpu() + y.cpu()).relu())
    assert d["graph_cache_hits"] == 2 and d["graph_cache_misses"] == 0, d
