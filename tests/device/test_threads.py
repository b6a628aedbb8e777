"""Threads writing one tensor: a storage update (read the old contents, write the new, swap) is atomic with respect
to every other writer, so disjoint writes from several threads all land, in every eager mode. Each test runs its
threads several times: the lost writes it guards against showed up in about half the runs."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import torch_tpu

MODES = ["debug", "strict", "fused"]


@pytest.mark.parametrize("mode", MODES)
def test_threads_writing_rows_of_one_tensor(mode: str) -> None:
    expected = torch.arange(1.0, 17.0).unsqueeze(1).expand(16, 64)
    with torch_tpu.eager_mode(mode):
        w = torch.ones(64, 64, device="tpu") / 64
        for _ in range(4):
            out = torch.zeros(16, 64, device="tpu")

            def job(i: int, out: torch.Tensor = out) -> None:
                out[i] = (torch.full((64,), float(i + 1), device="tpu") @ w).relu()

            with ThreadPoolExecutor(4) as ex:
                list(ex.map(job, range(16)))
            torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.parametrize("mode", MODES)
def test_threads_adding_to_their_own_element(mode: str) -> None:
    with torch_tpu.eager_mode(mode):
        x = torch.zeros(2, device="tpu")

        def add(i: int) -> None:
            for _ in range(200):
                x[i].add_(1)

        threads = [threading.Thread(target=add, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        torch.testing.assert_close(x.cpu(), torch.full((2,), 200.0))


@pytest.mark.parametrize("mode", MODES)
def test_threads_copying_then_scaling_rows(mode: str) -> None:
    with torch_tpu.eager_mode(mode):
        out = torch.zeros(64, 8, device="tpu")

        def job(i: int) -> None:
            out[i].copy_(torch.full((8,), float(i), device="tpu"))
            out[i].mul_(2)

        with ThreadPoolExecutor(4) as ex:
            list(ex.map(job, range(64)))
        torch.testing.assert_close(out.cpu(), torch.arange(64.0).unsqueeze(1).expand(64, 8) * 2)
