"""After an op's device-side check fails, its in-place/out= targets hold what they held before (the CPU raises
before writing), and each failure is reported once: at the op in debug mode, at the next sync otherwise."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import torch_tpu
from torch_tpu._internal.sync import computation_mlir

MODES = ["debug", "strict", "fused"]


def _i(*values: int) -> torch.Tensor:
    return torch.tensor(values, device="tpu")


CASES: dict[str, Callable[[torch.Tensor], object]] = {
    "setitem": lambda x: x.__setitem__([1, 10**9], 5.0),
    "index_put_": lambda x: x.index_put_((_i(2, 40),), torch.tensor(5.0, device="tpu")),
    "index_add_": lambda x: x.index_add_(0, _i(1, 99), torch.ones(2, device="tpu")),
    "index_copy_": lambda x: x.index_copy_(0, _i(1, 99), torch.ones(2, device="tpu")),
    "scatter_": lambda x: x.scatter_(0, _i(1, 99), 3.0),
    "put_": lambda x: x.put_(_i(1, 99), torch.ones(2, device="tpu")),
    "index_fill_": lambda x: x.index_fill_(0, _i(1, 99), 7.0),
    "index_put_2d": lambda x: x.view(2, 2).index_put_((_i(0, 1), _i(1, 5)), torch.tensor(5.0, device="tpu")),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_failed_op_leaves_its_target_unchanged(case: str, mode: str) -> None:
    with torch_tpu.eager_mode(mode):
        x = torch.arange(4.0, device="tpu")
        with pytest.raises((IndexError, RuntimeError)):
            CASES[case](x)
            x.cpu()
        torch.testing.assert_close(x.cpu(), torch.arange(4.0))


@pytest.mark.parametrize("case", ["index_copy_", "index_put_", "index_add_"])
def test_checked_in_place_scatter_does_not_rewrite_its_target(case: str) -> None:
    # The ops above write nothing on failure by masking their own updates: a select over the whole target would
    # make XLA copy the target on every update (vLLM's KV cache: the whole cache per decode step).
    updates = {
        "index_copy_": lambda c: c.index_copy_(0, _i(3, 7), torch.ones(2, 8, device="tpu")),
        "index_put_": lambda c: c.index_put_((_i(3, 7),), torch.ones(2, 8, device="tpu")),
        "index_add_": lambda c: c.index_add_(0, _i(3, 7), torch.ones(2, 8, device="tpu")),
    }
    with torch_tpu.eager_mode("fused"):
        cache = torch.zeros(4096, 8, device="tpu")
        torch.tpu.synchronize()
        updates[case](cache)
        text = computation_mlir(cache)
        assert "stablehlo.scatter" in text and "tensor<4096x8xi1>" not in text, text
        expected = torch.zeros(4096, 8)
        expected[[3, 7]] = 1.0
        torch.testing.assert_close(cache.cpu(), expected)


@pytest.mark.parametrize("mode", MODES)
def test_failure_in_a_backward_hook_is_reported_once(mode: str) -> None:
    with torch_tpu.eager_mode(mode):
        x = torch.randn(3, device="tpu", requires_grad=True)
        x.register_hook(lambda g: g + torch.zeros(3, device="tpu")[_i(0, 10)].sum())
        steps = [lambda: (x * 2).sum().backward()] + [lambda: torch.ones(2, device="tpu").sum().item()] * 2
        outcomes = []
        for step in steps:  # the backward, then two unrelated syncs: exactly one of them raises
            try:
                step()
                outcomes.append("ok")
            except IndexError:
                outcomes.append("IndexError")
        assert outcomes.count("IndexError") == 1, outcomes
