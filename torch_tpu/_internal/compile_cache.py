"""The compile cache as TorchTPU exposes it: `torch.tpu._get_cache_stats()`, `torch.tpu._clear_cache()`, and the
`allow_excess_precision` switch of the programs compiled from now on.

torch_tpu's cache has two tiers: compiled executables in memory (bounded by TORCH_TPU_PROGRAM_CACHE, least recently
used dropped) and serialized executables on disk (TORCH_TPU_CACHE_DIR, bounded by TORCH_TPU_CACHE_MAX_BYTES, least
recently used files removed). Both are keyed by the program text, the plugin, its version and the compile options.
"""

from __future__ import annotations

import dataclasses

from torch_tpu import _C, runtime


@dataclasses.dataclass(frozen=True)
class EntryStats:
    """One program in the memory tier."""

    label: str  # tpu:<first ops>#<hash>, as profiler rows name it
    read_count: int  # requests it answered after the one that compiled (or loaded) it
    compilation_duration: float  # seconds; 0.0 when it was loaded from the disk tier
    from_disk: bool


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """Requests and hits since the process started, and the programs held in memory (most recently used first)."""

    num_cache_reqs: int
    num_cache_hits: int
    num_disk_hits: int
    num_compiles: int
    per_entry_stats: list[EntryStats]
    disk_directory: str  # "" when the disk tier is off
    disk_bytes: int
    disk_limit_bytes: int  # 0: no bound


def get_cache_stats() -> CacheStats:
    cache = runtime.get().cache
    c = _C.runtime_counters()
    hits = int(c["cache_hits"])
    return CacheStats(
        num_cache_reqs=hits + int(c["cache_misses"]),
        num_cache_hits=hits,
        num_disk_hits=int(c["disk_cache_hits"]),
        num_compiles=int(c["compiles"]),
        per_entry_stats=[EntryStats(**e) for e in cache.entry_stats()],
        disk_directory=cache.directory,
        disk_bytes=int(cache.disk_bytes()),
        disk_limit_bytes=int(cache.disk_limit),
    )


def clear_cache(disk: bool = True) -> None:
    """Drops every compiled program from memory and (with `disk`) removes the disk tier's files. Programs still
    referenced by a pending graph or a replayed torch.compile graph stay alive until those are gone."""
    _C._flush()
    cache = runtime.get().cache
    cache.clear()
    if disk:
        cache.clear_disk()


def allow_excess_precision() -> bool:
    return bool(runtime.get().cache.allow_excess_precision)


def set_allow_excess_precision(value: bool) -> None:
    """XLA's xla_allow_excess_precision for the programs compiled from now on (False by default, so bfloat16 and
    float16 results are rounded to their type after every op, as PyTorch's kernels round them)."""
    if not isinstance(value, bool):
        raise TypeError(f"allow_excess_precision must be a bool, not {type(value).__name__}")
    _C._flush()  # what was recorded before compiles under the old setting
    runtime.get().cache.allow_excess_precision = value
