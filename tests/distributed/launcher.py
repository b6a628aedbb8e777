"""Launches a case of tests/distributed/cases.py in `world` real processes, the way torchrun would (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT), with a hard deadline: on expiry every rank is killed, so a broken
collective can fail a test but never hang CI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"--- rank {self.rank} (rc={self.returncode})\n{self.stdout[-4000:]}\n{self.stderr[-6000:]}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    case: str,
    world: int,
    *args: str,
    deadline_s: float = 240.0,
    env: dict[str, str] | None = None,
    rank_env: Callable[[int], dict[str, str]] | None = None,
) -> list[RankResult]:
    """Runs `python -m tests.distributed.cases <case> <args>` as `world` ranks; returns each rank's exit and output."""
    port = free_port()
    procs: list[subprocess.Popen[str]] = []
    for rank in range(world):
        e = dict(os.environ)
        e.update(
            {
                "PYTHONPATH": REPO + os.pathsep + e.get("PYTHONPATH", ""),
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "OMP_NUM_THREADS": "1",
                "TORCH_TPU_FALLBACK": e.get("TORCH_TPU_FALLBACK", "silent"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        e.update(env or {})
        e.update(rank_env(rank) if rank_env else {})
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "tests.distributed.cases", case, *args],
                cwd=REPO,
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    end = time.monotonic() + deadline_s
    results: list[RankResult] = []
    for rank, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(0.1, end - time.monotonic()))
            results.append(RankResult(rank, p.returncode, out, err))
        except subprocess.TimeoutExpired:
            results.append(RankResult(rank, None, "", ""))
    for rank, p in enumerate(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            results[rank] = RankResult(rank, None, out, err + "\n[killed at the launcher deadline]")
    return results


def assert_all_ok(results: list[RankResult]) -> None:
    bad = [r for r in results if r.returncode != 0]
    assert not bad, "ranks failed:\n" + "\n".join(r.describe() for r in results)
