"""Eager modes on one engine: strict and fused give debug's results; fused records ops into one graph per device
and runs it at sync points, so chains of ops are one execution and dead temporaries never occupy device memory."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import torch_tpu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRAIN = """
import torch
from torch import nn
def run(device):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).to(device)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(12, 8, generator=g).to(device), torch.randint(0, 3, (12,), generator=g).to(device)
    out = []
    for _ in range(10):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        out.append(loss.detach())
    torch.tpu.synchronize()
    return torch.stack([v.cpu() for v in out])
import torch_tpu
tpu, cpu = run("tpu"), run("cpu")
torch.testing.assert_close(tpu, cpu, rtol=1e-4, atol=1e-5)
print(torch_tpu.get_eager_mode(), torch_tpu.metrics()["executions"] > 0)
"""


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_mode_from_environment_matches_cpu(mode):
    env = {**os.environ, "PYTHONPATH": REPO, "TORCH_TPU_EAGER_MODE": mode}
    proc = subprocess.run([sys.executable, "-c", TRAIN], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{mode} True"


def test_set_eager_mode_validates_and_restores():
    before = torch_tpu.get_eager_mode()
    with torch_tpu.eager_mode("fused"):
        assert torch_tpu.get_eager_mode() == "fused"
    assert torch_tpu.get_eager_mode() == before
    with pytest.raises(ValueError, match="eager mode must be one of"):
        torch_tpu.set_eager_mode("lazy")


def _chain(x: torch.Tensor) -> torch.Tensor:
    for _ in range(10):
        x = (x * 1.01 + 0.5).tanh()
    return x


def test_elementwise_chain_is_one_execution_in_fused_mode():
    x = torch.randn(32, 32)
    xt = x.to("tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        before = torch_tpu.metrics()["executions"]
        y = _chain(xt)
        assert torch_tpu.metrics()["executions"] == before  # recorded, not run
        result = y.cpu()
        assert torch_tpu.metrics()["executions"] == before + 1
    torch.testing.assert_close(result, _chain(x))


def test_fused_inplace_views_and_aliasing_match_cpu():
    def program(device: str) -> list[torch.Tensor]:
        base = torch.arange(24.0, device=device).reshape(4, 6)
        view = base[1:3, ::2]
        view.mul_(10)  # written through a strided view
        t = base.t()
        t[0].add_(100)  # and through a transpose
        other = base.clone()
        base.zero_()
        keep = other.sum(0)
        del other  # dies before the graph runs
        return [base, view, keep, t.contiguous()]

    with torch_tpu.eager_mode("fused"):
        tpu = [t.cpu() for t in program("tpu")]
    for a, b in zip(tpu, program("cpu"), strict=True):
        torch.testing.assert_close(a, b)


def test_fused_graph_reads_buffer_replaced_from_host():
    """A host->device copy into a storage the open graph already read must not reorder with the graph."""
    with torch_tpu.eager_mode("fused"):
        x = torch.ones(4, device="tpu")
        y = x * 2  # graph reads x
        x.copy_(torch.full((4,), 5.0))  # whole-storage upload replaces x's buffer
        z = x * 3
        torch.testing.assert_close(y.cpu(), torch.full((4,), 2.0))
        torch.testing.assert_close(z.cpu(), torch.full((4,), 15.0))


def test_fused_dead_temporaries_lower_peak_memory():
    x = torch.randn(256, 256).to("tpu")
    torch.tpu.synchronize()

    def peak(mode: str) -> int:
        gc.collect()
        torch.tpu.reset_peak_memory_stats()
        base = torch.tpu.memory_allocated()
        with torch_tpu.eager_mode(mode):
            y = x
            for _ in range(8):
                y = y * 1.5 + 1.0  # each step's temporaries die at once
            y.cpu()
        return torch.tpu.max_memory_allocated() - base

    strict, fused = peak("strict"), peak("fused")
    assert fused <= strict, (fused, strict)


def test_fused_dead_intermediates_are_never_booked():
    """Only storages alive when the graph runs count towards the allocator's statistics: the intermediates, and the
    copy a reshape of a transposed tensor makes, add nothing to memory_allocated() or its peak."""
    x = torch.randn(64, 32).to("tpu")
    torch.tpu.synchronize()
    gc.collect()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    with torch_tpu.eager_mode("fused"):
        y = (x * 2).t().reshape(-1)  # a clone: the view cannot be flattened
        s = (y.relu() + 1).sum()
        del y
        assert torch.tpu.memory_allocated() == base  # nothing has contents before the graph runs
        got = s.cpu()
    xc = x.cpu()
    torch.testing.assert_close(got, ((xc * 2).t().reshape(-1).relu() + 1).sum())
    assert torch.tpu.max_memory_allocated() - base == s.untyped_storage().nbytes()


def test_fused_index_error_reported_at_sync():
    emb = nn.Embedding(5, 3).to("tpu")
    with torch_tpu.eager_mode("fused"):
        before = torch_tpu.metrics()["host_syncs"]
        out = emb(torch.tensor([1, 7], device="tpu"))
        assert torch_tpu.metrics()["host_syncs"] == before  # no hidden wait at the op
        with pytest.raises(IndexError, match="index out of range"):
            out.cpu()


def test_fused_training_matches_cpu_and_fuses_the_step():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x, y = torch.randn(10, 8), torch.randint(0, 4, (10,))

    def train(device: str) -> tuple[list[float], int]:
        model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
        model.load_state_dict(ref.state_dict())
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        xd, yd = x.to(device), y.to(device)
        losses, execs = [], 0
        for step in range(4):
            start = torch_tpu.metrics()["executions"]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xd), yd)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step == 3:
                torch.tpu.synchronize()
                execs = torch_tpu.metrics()["executions"] - start
        return losses, execs

    with torch_tpu.eager_mode("fused"):
        fused_losses, fused_execs = train("tpu")
    with torch_tpu.eager_mode("strict"):
        _, strict_execs = train("tpu")
    cpu_losses, _ = train("cpu")
    torch.testing.assert_close(fused_losses, cpu_losses, rtol=1e-5, atol=1e-6)
    assert fused_execs * 5 <= strict_execs, (fused_execs, strict_execs)


def test_dump_dir_writes_each_compiled_program(tmp_path):
    code = "import torch, torch_tpu\nx = torch.arange(7.0, device='tpu')\nprint(((x * 3.5).exp().sum()).item())\n"
    env = {**os.environ, "PYTHONPATH": REPO, "TORCH_TPU_DUMP_DIR": str(tmp_path), "TORCH_TPU_CACHE_DIR": "off"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    dumps = list(tmp_path.glob("program-*.mlir"))
    assert dumps, "no program dumped"
    assert all("func.func @main" in p.read_text() for p in dumps)


def test_metrics_report_graphs_and_syncs_by_reason():
    torch_tpu.reset_op_counts()
    with torch_tpu.eager_mode("fused"):
        before = torch_tpu.metrics()
        y = (torch.ones(8, device="tpu") * 2).sum()
        y.item()
        after = torch_tpu.metrics()
    assert after["graphs_run"] > before["graphs_run"]
    assert after["graph_nodes"] - before["graph_nodes"] >= 2
    assert after["host_syncs_by_reason"].get("to_cpu", 0) >= 1
    assert after["nodes_per_graph"] > 0


def test_fused_graph_ends_at_each_optimizer_step_without_loss_reads():
    """A loop that never reads its loss still runs its graphs step by step: the graph is cut as optimizer.step()
    starts (forward and backward) and as it ends (the parameter updates), every step after the first hits the
    compile cache, and the losses equal the CPU's."""
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    x, y = torch.randn(9, 6), torch.randint(0, 3, (9,))

    def train(device: str) -> tuple[list[torch.Tensor], list[int], int]:
        model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
        model.load_state_dict(ref.state_dict())
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        xd, yd = x.to(device), y.to(device)
        losses, graphs, compiles = [], [], 0
        for step in range(5):
            if step == 2:
                compiles = torch_tpu.metrics()["compiles"]
            before = torch_tpu.metrics()["graphs_run"]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xd), yd)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
            graphs.append(torch_tpu.metrics()["graphs_run"] - before)
        compiles = torch_tpu.metrics()["compiles"] - compiles
        return [v.cpu() for v in losses], graphs, compiles

    with torch_tpu.eager_mode("fused"):
        losses, graphs, compiles = train("tpu")
    cpu_losses, _, _ = train("cpu")
    torch.testing.assert_close(losses, cpu_losses, rtol=1e-5, atol=1e-6)
    assert graphs[1:] == [2, 2, 2, 2], graphs
    assert compiles == 0


def test_fused_flush_with_in_place_update_does_not_wait():
    """A graph that updates a storage in place donates its old buffer; the flush (each optimizer step ends in one)
    must still return before the program has run. Releasing the donated buffer at once used to block until PJRT
    confirmed the donation, i.e. until the whole graph had run, so the host could never record ahead."""
    a = torch.randn(1024, 1024, device="tpu")
    w = torch.randn(1024, 1024, device="tpu")
    expected = w.cpu()
    with torch_tpu.eager_mode("fused"):
        for _ in range(2):  # the first run compiles
            torch.tpu.synchronize()
            donations = torch_tpu.metrics()["donations"]
            for _ in range(4):
                w.add_(a @ a)
            torch_tpu.flush()
            in_flight = not torch.tpu.current_stream().query()
            torch.tpu.synchronize()
            expected += 4 * (a.cpu() @ a.cpu())
    assert torch_tpu.metrics()["donations"] > donations  # the old buffer of `w` was donated
    assert in_flight  # four 1024^3 matmuls take tens of ms; the flush returned while they ran
    torch.testing.assert_close(w.cpu(), expected, rtol=1e-4, atol=1e-2)
