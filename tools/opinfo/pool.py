"""A pool of fresh (spawned) worker processes running conformance tasks, isolated from crashes and hangs.

A task is one entry and dtype with its directions. The worker announces each direction before running it, so when
a worker dies or overruns its timeout, that direction is recorded as crash / timeout, the worker is killed and
replaced, and the task's remaining directions go back on the queue.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

STARTUP_TIMEOUT_S = 300.0  # importing torch + op_db on a loaded machine
# Self-test hook (tests/ops/test_opinfo_floor.py): "crash:ENTRY,hang:ENTRY" makes a worker abort / hang there.
SELFTEST_ENV = "TORCH_TPU_OPINFO_SELFTEST"


@dataclass
class Task:
    entry: str
    dtype: str
    directions: list[str]
    samples: int


@dataclass
class _Worker:
    process: Any
    conn: Connection
    log_path: str
    task: Task | None = None
    direction: str | None = None
    deadline: float = 0.0
    log_offset: int = 0
    ready: bool = False
    done_dirs: list[str] = field(default_factory=list)


def _selftest(entry: str) -> None:
    for item in os.environ.get(SELFTEST_ENV, "").split(","):
        kind, _, name = item.partition(":")
        if name == entry and kind == "crash":
            print(f"selftest: aborting in {entry}", flush=True)
            os.abort()
        if name == entry and kind == "hang":
            time.sleep(3600)


def _worker_main(conn: Connection, log_path: str) -> None:
    """Worker process: fd 1/2 go to its log (the parent reads the tail after a crash); runs tasks until None."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import torch

    from tools.opinfo.check import run_check
    from tools.opinfo.entries import all_entries

    torch.set_num_threads(1)
    entries = all_entries()
    conn.send(("ready",))
    while True:
        task: Task | None = conn.recv()
        if task is None:
            sys.stdout.flush()
            os._exit(0)  # skips the interpreter's slow teardown (runtime threads, PJRT client)
        op = entries[task.entry]
        for direction in task.directions:
            conn.send(("start", direction))
            print(f"== {task.entry} {task.dtype} {direction}", flush=True)
            _selftest(task.entry)
            record = run_check(op, task.dtype, direction, task.samples)
            conn.send(("result", direction, record))
        conn.send(("done",))


def _log_tail(path: str, offset: int) -> str:
    try:
        with open(path, errors="replace") as f:
            f.seek(offset)
            lines = [ln.strip() for ln in f.read().splitlines() if ln.strip() and not ln.startswith("== ")]
    except OSError:
        return ""
    interesting = [ln for ln in lines if "Warning" not in ln]
    return (interesting or lines or [""])[-1][:300]


class Pool:
    """Runs tasks on `jobs` workers; on_result(entry, dtype, direction, record) gets every record."""

    def __init__(self, jobs: int, timeout_s: float, on_result: Callable[[str, str, str, dict[str, Any]], None]):
        self.jobs = max(1, jobs)
        self.timeout_s = timeout_s
        self.on_result = on_result
        self.ctx = multiprocessing.get_context("spawn")
        self.logdir = tempfile.mkdtemp(prefix="opinfo_workers_")
        self.spawned = 0
        self.workers: list[_Worker] = []

    def _spawn(self) -> _Worker:
        self.spawned += 1
        log_path = os.path.join(self.logdir, f"worker{self.spawned}.log")
        parent, child = self.ctx.Pipe()
        env_before = os.environ.get("TORCH_TPU_FALLBACK")
        os.environ["TORCH_TPU_FALLBACK"] = "silent"  # the workers count fallbacks; the warning text is noise
        try:
            process = self.ctx.Process(target=_worker_main, args=(child, log_path), daemon=True)
            process.start()
        finally:
            if env_before is None:
                os.environ.pop("TORCH_TPU_FALLBACK", None)
            else:
                os.environ["TORCH_TPU_FALLBACK"] = env_before
        child.close()
        return _Worker(process, parent, log_path, deadline=time.monotonic() + STARTUP_TIMEOUT_S)

    def _assign(self, w: _Worker, task: Task) -> None:
        w.task, w.direction, w.done_dirs = task, None, []
        w.log_offset = os.path.getsize(w.log_path) if os.path.exists(w.log_path) else 0
        w.deadline = time.monotonic() + (self.timeout_s if w.ready else STARTUP_TIMEOUT_S + self.timeout_s)
        w.conn.send(task)

    def _fail(self, w: _Worker, status: str, queue: deque[Task]) -> None:
        """Records the running direction as crash/timeout, requeues the rest of the task, kills the worker."""
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
        task = w.task
        if task is not None:
            direction = w.direction or task.directions[len(w.done_dirs)]
            if status == "timeout":
                reason = f"no result within {self.timeout_s:.0f} s (worker killed)"
            else:
                code = w.process.exitcode
                how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                tail = _log_tail(w.log_path, w.log_offset)
                reason = f"worker died ({how})" + (f": {tail}" if tail else "")
            self.on_result(task.entry, task.dtype, direction, {"status": status, "reason": reason, "fallback_ops": {}})
            rest = [d for d in task.directions if d not in w.done_dirs and d != direction]
            if rest:
                queue.appendleft(Task(task.entry, task.dtype, rest, task.samples))
        w.conn.close()
        self.workers.remove(w)  # replaced when there is work for it (run's loop)

    def _handle(self, w: _Worker, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
            if w.task is not None:
                w.deadline = time.monotonic() + self.timeout_s
        elif kind == "start":
            w.direction = msg[1]
            w.deadline = time.monotonic() + self.timeout_s
        elif kind == "result":
            assert w.task is not None
            w.done_dirs.append(msg[1])
            self.on_result(w.task.entry, w.task.dtype, msg[1], msg[2])
            w.direction = None
        elif kind == "done":
            w.task = None

    def run(self, tasks: list[Task]) -> None:
        queue: deque[Task] = deque(tasks)
        self.workers = [self._spawn() for _ in range(min(self.jobs, max(1, len(tasks))))]
        try:
            while queue or any(w.task is not None for w in self.workers):
                while queue and len(self.workers) < self.jobs and all(w.task is not None for w in self.workers):
                    self.workers.append(self._spawn())
                for w in self.workers:
                    if w.task is None and queue:
                        self._assign(w, queue.popleft())
                busy = [w for w in self.workers if w.task is not None]
                if not busy:
                    continue
                now = time.monotonic()
                wait_s = max(0.0, min(w.deadline for w in busy) - now)
                ready = wait([x for w in busy for x in (w.conn, w.process.sentinel)], timeout=wait_s)
                for w in list(busy):
                    if w.conn in ready:
                        try:
                            while w.conn.poll():
                                self._handle(w, w.conn.recv())
                        except (EOFError, OSError):
                            self._fail(w, "crash", queue)
                            continue
                    if w.task is not None and w.process.sentinel in ready and not w.conn.poll():
                        self._fail(w, "crash", queue)
                    elif w.task is not None and time.monotonic() > w.deadline:
                        self._fail(w, "timeout", queue)
        finally:
            self.close()

    def close(self) -> None:
        for w in self.workers:
            try:
                if w.ready or w.conn.poll():
                    w.conn.send(None)
                else:
                    w.process.kill()  # still importing: nothing to finish
            except (OSError, ValueError):
                pass
        for w in self.workers:
            w.process.join(10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(5)
        self.workers = []
        for name in os.listdir(self.logdir):
            os.unlink(os.path.join(self.logdir, name))
        os.rmdir(self.logdir)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
