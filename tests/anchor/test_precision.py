"""TorchTPU's precision API: torch.tpu.precision / Precision and PyTorch's float32 matmul precision set the
precision_config of the matrix products in the emitted programs, in every eager mode, and are part of what programs
and replayed torch.compile graphs are cached by; allow_excess_precision reaches the compile options."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C, runtime
from torch_tpu._internal import sync
from torch_tpu.compile import counters

MODES = ["debug", "strict", "fused"]
P = torch.tpu.Precision


def precisions(program: str) -> list[str]:
    return re.findall(r"#stablehlo<precision (\w+)>", program)


_shapes = iter(range(7, 1000))


def compiled_precisions(tmp_path: Path, fn: Callable[[int], torch.Tensor]) -> list[str]:
    """The precisions of the products in the programs `fn(n)` compiles (n: a size this process never used, so the
    programs are new to the memory tier and get written to the dump directory)."""
    n = next(_shapes)
    cache = runtime.get().cache
    cache.set_dump_directory(str(tmp_path))
    try:
        fn(n).cpu()
    finally:
        cache.set_dump_directory("")
    found = [precisions(p.read_text()) for p in sorted(tmp_path.glob("program-*.mlir"))]
    for p in tmp_path.glob("program-*.mlir"):
        p.unlink()
    return [x for f in found for x in f]


@pytest.fixture(autouse=True)
def _matmul_precision() -> Iterator[None]:
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)
    assert _C._precision_override() == -1, "a precision block leaked"


def _operands() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, 5, generator=g), torch.randn(5, 4, generator=g)


@pytest.mark.parametrize("mode", MODES)
def test_pytorch_matmul_precision_maps_to_the_dot(mode: str, tmp_path: Path) -> None:
    with torch_tpu.eager_mode(mode):
        for setting, want in [("highest", "HIGHEST"), ("high", "HIGH"), ("medium", "DEFAULT")]:
            torch.set_float32_matmul_precision(setting)
            got = compiled_precisions(
                tmp_path, lambda n: torch.ones(n, 3, device="tpu") @ torch.ones(3, 2, device="tpu")
            )
            assert got == [want, want], setting
        a, b = _operands()
        torch.testing.assert_close((a.to("tpu") @ b.to("tpu")).cpu(), a @ b)


@pytest.mark.parametrize("mode", MODES)
def test_precision_block_wins_and_nests(mode: str, tmp_path: Path) -> None:
    torch.set_float32_matmul_precision("high")

    def product(n: int) -> torch.Tensor:
        return torch.ones(n, 4, device="tpu") @ torch.ones(4, 3, device="tpu")

    with torch_tpu.eager_mode(mode):
        with torch.tpu.precision(P.HIGHEST):
            assert compiled_precisions(tmp_path, product) == ["HIGHEST"] * 2
            with torch.tpu.precision(P.DEFAULT):
                assert compiled_precisions(tmp_path, product) == ["DEFAULT"] * 2
            assert torch_tpu._internal.precision.current() == P.HIGHEST
            assert compiled_precisions(tmp_path, product) == ["HIGHEST"] * 2
        assert compiled_precisions(tmp_path, product) == ["HIGH"] * 2
        a, b = _operands()
        with torch.tpu.precision(P.DEFAULT):
            out = a.to("tpu") @ b.to("tpu")
        torch.testing.assert_close(out.cpu(), a @ b)  # XLA-CPU computes float32 products in every mode


def test_a_fused_graph_does_not_mix_precisions() -> None:
    """Ops recorded before a block run before it: the block's products get its precision even when read later."""
    a, b = _operands()
    with torch_tpu.eager_mode("fused"):
        x, y = a.to("tpu"), b.to("tpu")
        before = x @ y
        with torch.tpu.precision(P.DEFAULT):
            inside = x @ y
        assert sync.is_materialized(before)  # the block's first product ran the graph recorded before it
        assert precisions(sync.computation_mlir(inside)) == ["DEFAULT"] * 2
        torch.testing.assert_close(inside.cpu(), a @ b)


@pytest.mark.parametrize("mode", MODES)
def test_convolution_and_linear_carry_the_precision(mode: str, tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(1)
    img, w = torch.randn(1, 2, 6, 6, generator=g), torch.randn(3, 2, 3, 3, generator=g)
    with torch_tpu.eager_mode(mode), torch.tpu.precision(P.HIGH):
        got = compiled_precisions(tmp_path, lambda n: F.conv2d(torch.ones(1, 2, n, n, device="tpu"), w.to("tpu")))
        assert got == ["HIGH", "HIGH"]
        got = compiled_precisions(
            tmp_path, lambda n: F.linear(torch.ones(n, 5, device="tpu"), torch.ones(3, 5, device="tpu"))
        )
        assert got == ["HIGH", "HIGH"]
        out = F.conv2d(img.to("tpu"), w.to("tpu"))
    torch.testing.assert_close(out.cpu(), F.conv2d(img, w), rtol=1e-4, atol=1e-5)


def test_precision_is_part_of_the_program_key() -> None:
    n = next(_shapes)
    x, y = torch.ones(n, 3, device="tpu"), torch.ones(3, 2, device="tpu")
    for _ in range(3):  # a new structure is lowered as it comes first, then recorded
        (x @ y).cpu()
    misses = _C.runtime_counters()["cache_misses"]
    (x @ y).cpu()
    assert _C.runtime_counters()["cache_misses"] == misses  # same program again: a hit
    with torch.tpu.precision(P.DEFAULT):
        (x @ y).cpu()
    assert _C.runtime_counters()["cache_misses"] > misses  # another precision: another program


def test_replayed_compile_graph_follows_the_precision() -> None:
    a, b = _operands()
    x, y = a.to("tpu"), b.to("tpu")
    f = torch.compile(lambda p, q: (p @ q).relu(), backend="tpu")
    f(x, y)
    f(x, y)
    captured = counters.snapshot()["captured_graphs"]
    with torch.tpu.precision(P.DEFAULT):
        out = f(x, y)
    assert counters.snapshot()["captured_graphs"] == captured + 1  # not replayed under the other precision
    torch.testing.assert_close(out.cpu(), (a @ b).relu())


def test_bad_precision_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="precision mode must be"), torch.tpu.precision("HIGHEST"):  # type: ignore[arg-type]
        pass


def test_allow_excess_precision_switch() -> None:
    assert torch.tpu.allow_excess_precision is False  # rounded per op, as PyTorch's kernels round
    x = torch.randn(16, dtype=torch.bfloat16).to("tpu")
    (x * 3 + 1).cpu()
    misses = _C.runtime_counters()["cache_misses"]
    torch.tpu.allow_excess_precision = True
    try:
        assert torch.tpu.allow_excess_precision is True
        (x * 3 + 1).cpu()
        assert _C.runtime_counters()["cache_misses"] > misses  # compiled again under the other option
    finally:
        torch.tpu.allow_excess_precision = False
    with pytest.raises(TypeError, match="must be a bool"):
        torch.tpu.allow_excess_precision = "yes"  # type: ignore[assignment]
