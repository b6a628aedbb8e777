"""TORCH_TRACE for eager programs: with TORCH_TRACE set when the process starts, every program torch_tpu compiles
(an eager op, a fused graph, a compiled graph's program) is written to PyTorch's structured trace as a string
artifact named `torchtpu_eager_stablehlo`, and the ATen ops each fused eager graph was lowered from as
`torchtpu_eager_aten_graph`, next to what torch.compile itself logs, so `tlparse` shows them.

How: the compile cache writes each program's StableHLO text to a dump directory (TORCH_TPU_DUMP_DIR's mechanism; a
private temporary one unless TORCH_TPU_DUMP_DIR is set); a daemon thread moves the new files into the trace every few
seconds, and once more at exit. The engine never calls back into Python for it.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from torch_tpu import config

_INTERVAL_S = 5.0
_lock = threading.Lock()
_state: dict[str, Any] = {}


def _emit(name: str, text: str) -> None:
    from torch._logging import trace_structured

    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": name, "encoding": "string"},
        payload_fn=lambda: text,
        expect_trace_id=False,
    )


# Dumped files and the trace artifact each becomes: a program's StableHLO, and for a fused eager graph the ATen ops
# it was lowered from (one per line, with their argument types).
_ARTIFACTS = {".mlir": "torchtpu_eager_stablehlo", ".aten.txt": "torchtpu_eager_aten_graph"}


def drain() -> int:
    """Moves the programs compiled since the last drain into the trace; returns how many."""
    with _lock:
        directory: Path | None = _state.get("dir")
        if directory is None:
            return 0
        seen: set[str] = _state["seen"]
        emitted = 0
        for path in sorted(directory.glob("program-*"), key=_mtime):
            artifact = next((a for suffix, a in _ARTIFACTS.items() if path.name.endswith(suffix)), None)
            if artifact is None or path.name in seen:
                continue
            try:
                text = path.read_text()
            except OSError:
                continue
            _emit(artifact, text)
            emitted += 1
            if _state["owned"]:
                path.unlink(missing_ok=True)
            else:
                seen.add(path.name)  # the user's dump directory keeps its files
        return emitted


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # removed meanwhile
        return 0


def _loop(stop: threading.Event) -> None:
    while not stop.wait(_INTERVAL_S):
        drain()


def _finish() -> None:
    stop: threading.Event | None = _state.get("stop")
    if stop is not None:
        stop.set()
    drain()
    with _lock:
        if _state.get("owned") and _state.get("dir") is not None:
            shutil.rmtree(_state["dir"], ignore_errors=True)
        _state.clear()


def enable_if_requested(cache: Any, dump_dir: str | None) -> bool:
    """Starts the trace of eager programs when TORCH_TRACE is set (idempotent). `cache` is the runtime's compile
    cache; `dump_dir` is TORCH_TPU_DUMP_DIR (used as is when set)."""
    if not config.load().torch_trace or _state:
        return False
    owned = not dump_dir
    directory = Path(tempfile.mkdtemp(prefix="torch_tpu_trace_")) if owned else Path(dump_dir or "")
    if owned:
        cache.set_dump_directory(str(directory))
    stop = threading.Event()
    _state.update(dir=directory, owned=owned, seen=set(), stop=stop)
    threading.Thread(target=_loop, args=(stop,), name="torch_tpu-trace", daemon=True).start()
    atexit.register(_finish)
    return True
