"""Counters of the compiled mode, merged into `torch_tpu.metrics()` (importing this module imports nothing heavy)."""

from __future__ import annotations

_COUNTS: dict[str, int] = {
    "compiled_graphs": 0,  # Dynamo graphs handed to the tpu backend (first compiles and recompiles)
    "dynamo_recompiles": 0,  # of those, graphs of a frame that had been compiled before (a guard failed)
    "aot_forward_graphs": 0,  # AOTAutograd forward/inference graphs compiled
    "aot_backward_graphs": 0,  # AOTAutograd backward graphs compiled
    "compiled_calls": 0,  # calls of compiled forward/inference graphs
    "compiled_backward_calls": 0,  # calls of compiled backward graphs
    "bucketed_calls": 0,  # calls whose dynamic dimensions were padded up to a bucket
    "captured_graphs": 0,  # compiled graph calls captured for replay (one per graph and input signature)
    "refused_captures": 0,  # captures refused (the call did something a replay cannot repeat)
    "replayed_calls": 0,  # compiled graph calls run from a capture: one execution, no op dispatched
}


def bump(name: str, by: int = 1) -> None:
    _COUNTS[name] += by


def snapshot() -> dict[str, int]:
    return dict(_COUNTS)


def reset() -> None:
    for key in _COUNTS:
        _COUNTS[key] = 0
