"""At interpreter exit, lets the autograd engine's tpu threads let go of their last backward while Python still runs.

`backward()` (torch 2.13) stashes a Python object, the caller's contextvars.Context, in the thread-local state that
each graph task copies. The engine runs the tpu parts of a backward on its own thread per device, and that thread
drops its reference to the graph task just after it wakes the caller. When the caller is the program's last
backward, the interpreter may already be finalizing by then: dropping the Python object needs the GIL, the thread
is ended inside a noexcept destructor, and the process aborts ("terminate called without an active exception")
after the program has finished. An atexit hook runs a no-op backward through every tpu device thread: a thread
takes it only once it has dropped the previous graph task, and this one carries no Python object. A process that
never used the device (every `import torch` loads torch_tpu) skips it.
"""

from __future__ import annotations

import atexit
import threading

import torch

from torch_tpu import _C

_JOIN_TIMEOUT_S = 5.0


def _device_used() -> bool:
    """Whether any tpu op ran or was recorded: without one, no backward can have run on a tpu device thread."""
    counters = _C.runtime_counters()
    return bool(counters["graph_nodes"] or counters["executions"] or counters["buffers_created"])


def _drain_device_threads() -> None:
    from torch.autograd.variable import Variable

    for index in range(torch.tpu.device_count()):
        leaf = torch.zeros((), device=torch.device("tpu", index), requires_grad=True)
        grad = torch.zeros((), device=torch.device("tpu", index))
        # The engine itself, not torch.autograd.backward, so that no context is stashed for this graph task.
        Variable._execution_engine.run_backward((leaf,), (grad,), False, False, (), True, True)


def _drain_quietly() -> None:
    try:
        _drain_device_threads()
    except Exception:  # noqa: BLE001  (exiting: a broken device must not turn a clean exit into a traceback)
        pass


def _at_exit() -> None:
    if not _device_used():
        return
    # On a daemon thread with a deadline: a device thread still busy (a backward left running by another thread)
    # must not hold up the exit.
    worker = threading.Thread(target=_drain_quietly, name="torch_tpu-exit-drain", daemon=True)
    worker.start()
    worker.join(_JOIN_TIMEOUT_S)


def install() -> None:
    atexit.register(_at_exit)
