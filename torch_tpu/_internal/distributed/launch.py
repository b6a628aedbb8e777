"""TorchTPU's `set_tpu_launch_env`: the environment a job's ranks must agree on, decided once in the parent process
before a launcher (torchrun, torch.multiprocessing.spawn, ...) starts them.

Never overwrites a variable that is already set, so a second call changes nothing and an operator can pin any value.
What is set, as in TorchTPU: `TORCH_TPU_XPROF_SESSION_ID` (a shared profiling session id); on one host,
`TORCH_TPU_SLICEBUILDER_ADDRESSES` (one `localhost:<free port>` per rank) and `TORCH_TPU_TOPOLOGY`; on several hosts
(more than one name in `TPU_WORKER_HOSTNAMES`, `nnodes > 1`, or `JOB_COMPLETION_INDEX` set), per-rank addresses on
every host plus the rendezvous variables `NNODES`, `NODE_RANK`, `MASTER_ADDR`, `MASTER_PORT`.

Differences: torch_tpu's `tpu_dist` rendezvouses through torch.distributed's store (MASTER_ADDR/PORT, as torchrun
sets them) and reads neither the slicebuilder addresses nor the topology; they are set for scripts that read them.
XLA-CPU devices have no physical topology, so `TORCH_TPU_TOPOLOGY` is "<devices>,1,1", and on several hosts
`NODE_RANK` comes from `JOB_COMPLETION_INDEX` only (TorchTPU can also rank hosts by their chips' coordinates).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from torch_tpu import config

__all__ = ["set_tpu_launch_env"]


def _set_once(name: str, make: Callable[[], str]) -> str:
    """`os.environ[name]`, set to `make()` first when unset."""
    value = os.environ.get(name)
    if value is None:
        value = make()
        os.environ[name] = value
    return value


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local_device_count() -> int:
    import torch

    return int(torch.tpu.device_count()) if hasattr(torch, "tpu") else 0


def _multi_host(hosts: list[str], nnodes: int | None, nproc_per_node: int | None, completion: str | None) -> None:
    def need_hosts() -> list[str]:
        if not hosts:
            raise ValueError(
                "set_tpu_launch_env(): a multi-host job needs TPU_WORKER_HOSTNAMES, a comma-separated list of the "
                "worker hosts; it is unset"
            )
        return hosts

    def addresses() -> str:
        cfg = config.load()
        base = cfg.base_port
        per_host = cfg.devices_per_host or nproc_per_node or 8
        return ",".join(f"{h}:{base + i}" for h in need_hosts() for i in range(per_host))

    def node_rank() -> str:
        if completion is None:
            raise ValueError(
                "set_tpu_launch_env(): NODE_RANK is unset and cannot be derived: set NODE_RANK or JOB_COMPLETION_INDEX "
                "(XLA-CPU devices have no coordinates to rank hosts by)"
            )
        return str(int(completion))

    _set_once("TORCH_TPU_SLICEBUILDER_ADDRESSES", addresses)
    _set_once("NNODES", lambda: str(nnodes if nnodes is not None else len(need_hosts())))
    _set_once("NODE_RANK", node_rank)
    _set_once("MASTER_ADDR", lambda: need_hosts()[0])
    _set_once("MASTER_PORT", lambda: "29500")


def set_tpu_launch_env(*, nnodes: int | None = None, nproc_per_node: int | None = None) -> None:
    """Sets the launch environment described in the module docstring, leaving set variables alone.

    `nnodes`, when given, must match the number of names in `TPU_WORKER_HOSTNAMES` (if set). `nproc_per_node` is the
    number of ranks per host: by default the local tpu device count on one host, and `TORCH_TPU_DEVICES_PER_HOST` or
    8 on several hosts. ValueError on a host-count mismatch, when one host has no tpu device, or when a multi-host
    variable cannot be derived.
    """
    _set_once("TORCH_TPU_XPROF_SESSION_ID", lambda: str(time.time_ns()))
    listed = os.environ.get("TPU_WORKER_HOSTNAMES", "")
    hosts = [h for h in listed.split(",") if h]
    if nnodes is not None and hosts and nnodes != len(hosts):
        raise ValueError(
            f"set_tpu_launch_env(): nnodes={nnodes} does not match the {len(hosts)} host(s) of TPU_WORKER_HOSTNAMES "
            f"({listed!r})"
        )
    completion = os.environ.get("JOB_COMPLETION_INDEX")
    if (nnodes is not None and nnodes > 1) or len(hosts) > 1 or completion is not None:
        _multi_host(hosts, nnodes, nproc_per_node, completion)
        return
    count = nproc_per_node if nproc_per_node is not None else _local_device_count()
    if count <= 0:
        raise ValueError("set_tpu_launch_env(): expected tpu devices, got none")
    _set_once("TORCH_TPU_SLICEBUILDER_ADDRESSES", lambda: ",".join(f"localhost:{_free_port()}" for _ in range(count)))
    _set_once("TORCH_TPU_TOPOLOGY", lambda: f"{count},1,1")
