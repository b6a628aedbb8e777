"""The engine side of async_compile's warm-up (`_C._flush_compile_only`): the open fused graph goes to the background
compiler without running only when the calling thread's ops alone are in it; a graph another thread opened or joined
runs as usual, so its results are never dropped. Values are compared with CPU, and the compile cache's tickets say
whether anything went to the background."""

from __future__ import annotations

import threading

import torch

import torch_tpu
from torch_tpu import _C, runtime


def _in_thread(fn) -> None:
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn()  # in the caller's (fused) mode: leaving a mode block would run the graph
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def _odd_shape() -> int:
    """A length no other test uses, so the ops are new structures (lowered as recorded) and the program is new."""
    return 1000 + (runtime.get().cache.last_ticket * 7 + threading.get_ident()) % 997


def test_own_fresh_graph_compiles_in_the_background_and_does_not_run() -> None:
    n = _odd_shape()
    x = torch.arange(n, dtype=torch.float32).to("tpu")
    torch_tpu.flush()
    cache = runtime.get().cache
    tickets = cache.last_ticket
    with torch_tpu.eager_mode("fused"):
        y = (x * 3).sin() + 2
        assert _C._flush_compile_only(0)
    assert cache.last_ticket == tickets + 1
    cache.wait_background(cache.last_ticket)
    z = (x * 3).sin() + 2  # the same program: compiled, not compiled again
    compiles = torch_tpu.metrics()["compiles"]
    torch.testing.assert_close(z.cpu(), (torch.arange(n, dtype=torch.float32) * 3).sin() + 2)
    assert torch_tpu.metrics()["compiles"] == compiles
    del y  # never computed


def test_a_graph_another_thread_opened_or_joined_runs() -> None:
    n = _odd_shape() + 1
    base = torch.arange(n, dtype=torch.float32)
    x = base.to("tpu")
    torch_tpu.flush()
    cache = runtime.get().cache
    tickets = cache.last_ticket
    out: dict[str, torch.Tensor] = {}

    def other() -> None:
        out["y"] = x * 5 - 1  # pending in the device's open graph

    with torch_tpu.eager_mode("fused"):
        _in_thread(other)
        assert not _C._flush_compile_only(0)  # opened by the other thread: run
    torch.testing.assert_close(out["y"].cpu(), base * 5 - 1)
    with torch_tpu.eager_mode("fused"):
        mine = x.cos() * 2
        _in_thread(lambda: out.__setitem__("w", x.exp() - 3))  # joins the graph this thread opened
        assert not _C._flush_compile_only(0)
    torch.testing.assert_close(out["w"].cpu(), base.exp() - 3)
    torch.testing.assert_close(mine.cpu(), base.cos() * 2)
    assert cache.last_ticket == tickets  # nothing went to the background
