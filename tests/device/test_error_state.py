"""After an op's device-side check fails, its in-place/out= targets hold what they held before (the CPU raises
before writing), and each failure is reported once: at the op in debug mode, at the next sync otherwise."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import torch_tpu

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
