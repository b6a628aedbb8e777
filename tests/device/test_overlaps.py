"""Arguments that share memory behave as on the CPU: a written tensor that partly overlaps an input raises CPU's
error (instead of computing from a snapshot), writes through an expanded tensor that CPU allows (fill_, zero_,
index_put_) work, and in-place foreach ops over overlapping list entries apply entry by entry. Each case runs on CPU
and on tpu in every eager mode; both must raise the same error or leave the same values."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import torch_tpu

MODES = ["debug", "strict", "fused"]


def _index(x: torch.Tensor, *values: int) -> torch.Tensor:
    return torch.tensor(values, device=x.device)


CASES: dict[str, Callable[[torch.Tensor], object]] = {
    # CPU refuses: the written tensor partly overlaps an input
    "copy_shifted": lambda x: x[1:].copy_(x[:-1]),
    "setitem_shifted": lambda x: x[1:].__setitem__(slice(None), x[:-1]),
    "iadd_shifted": lambda x: x[2:].__iadd__(x[:-2]),
    "mul_shifted": lambda x: x[2:].mul_(x[:-2]),
    "add_out_shifted": lambda x: torch.add(x[:-2], 1, out=x[2:]),
    "add_transposed": lambda x: x[:4].view(2, 2).add_(x[:4].view(2, 2).t()),
    "copy_transposed": lambda x: x[:4].view(2, 2).copy_(x[:4].view(2, 2).t()),
    "index_select_out": lambda x: torch.index_select(x[:-1], 0, _index(x, 0, 0, 0, 0, 0), out=x[1:]),
    "cat_out": lambda x: torch.cat([x[:2], x[2:4]], out=x[1:5]),
    "clamp_out": lambda x: torch.clamp(x[:-1], 0, 3, out=x[1:]),
    "where_out": lambda x: torch.where(x[:-1] > 2, x[:-1], x[:-1] * 0, out=x[1:]),
    "div_out": lambda x: torch.div(x[:-1], 2, out=x[1:]),
    "addcmul_shifted": lambda x: x[1:].addcmul_(x[:-1], x[:-1]),
    "lerp_shifted": lambda x: x[1:].lerp_(x[:-1], 0.5),
    "foreach_add_shifted": lambda x: torch._foreach_add_([x[1:]], [x[:-1]]),
    "add_expanded": lambda x: x[:1].expand(4).add_(1),
    # CPU allows
    "same_tensor": lambda x: x[:4].view(2, 2).add_(x[:4].view(2, 2)),
    "disjoint_rows": lambda x: x[:3].add_(x[3:]),
    "fill_expanded": lambda x: x[:1].expand(4).fill_(7),
    "zero_expanded": lambda x: x[:1].expand(4).zero_(),
    "index_put_expanded": lambda x: (
        x[:3].view(1, 3).expand(2, 3).index_put_((_index(x, 0),), x.new_tensor([9, 8, 7.0]))
    ),
    # in-place foreach over overlapping entries: one entry after another
    "foreach_mul_overlapping": lambda x: torch._foreach_mul_([x[:3], x[3:], x[::2]], 2.0),
    "foreach_add_repeated": lambda x: torch._foreach_add_([x[:2], x[:2], x[4:]], 1.0),
    "foreach_add_list_repeated": lambda x: torch._foreach_add_([x[:2], x[:2]], [x[4:], x[4:]]),
    "foreach_mul_scalars": lambda x: torch._foreach_mul_([x[1:3], x[:2]], [2.0, 3.0]),
}


def _outcome(device: str, case: str) -> torch.Tensor | str:
    x = torch.arange(6.0, device=device)
    try:
        CASES[case](x)
        return x.cpu()
    except RuntimeError as e:
        return str(e).split("\n")[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_overlapping_arguments_behave_as_on_cpu(case: str, mode: str) -> None:
    expected = _outcome("cpu", case)
    with torch_tpu.eager_mode(mode):
        got = _outcome("tpu", case)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert isinstance(got, torch.Tensor), got
        torch.testing.assert_close(got, expected)


def test_disjoint_foreach_entries_stay_one_call() -> None:
    """Views of one flat buffer that do not overlap (FSDP's flat parameters) stay one foreach node."""
    flat = torch.zeros(12, device="tpu")
    params = list(flat.split(4))
    before = torch_tpu.metrics()["lowered_ops"].get("aten::_foreach_add_.Scalar", 0)
    torch._foreach_add_(params, 1.0)
    after = torch_tpu.metrics()["lowered_ops"].get("aten::_foreach_add_.Scalar", 0)
    assert after - before == 1
    torch.testing.assert_close(flat.cpu(), torch.ones(12))
