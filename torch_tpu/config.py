"""The one place torch_tpu reads its environment variables: `VARIABLES` is their table (docs/environment.md is
generated from it: `python -m torch_tpu.config --markdown > docs/environment.md`), `load()` reads them."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    meaning: str
    default: str


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "TORCH_TPU_PJRT_PLUGIN",
        "a PJRT plugin .so path, or tpu / cuda / cpu (the installed plugin of that kind)",
        "discovered: libtpu, XLA-CUDA, XLA-CPU (each where its hardware is)",
    ),
    Variable("TPU_VISIBLE_CHIPS", "comma-separated device indices this process may use", "all"),
    Variable("TORCH_TPU_EAGER_MODE", "debug (wait after every op) / strict (one program per op) / fused", "fused"),
    Variable(
        "TORCH_TPU_DEFER_AND_FUSE",
        "TorchTPU's switch: 1 = fused, 0 = strict (when TORCH_TPU_EAGER_MODE is unset)",
        "unset",
    ),
    Variable("TORCH_TPU_LAUNCH_BLOCKING", "TorchTPU's switch: 1 = debug (wait after every op)", "unset"),
    Variable("TORCH_TPU_FALLBACK", "what an op without a lowering does: error / warn / silent", "warn"),
    Variable("TORCH_TPU_CACHE_DIR", "directory of the persistent compile cache; off disables it", "~/.cache/torch_tpu"),
    Variable(
        "TORCH_TPU_CACHE_MAX_BYTES",
        "size bound of the persistent compile cache (K/M/G suffixes); least recently used entries go first; 0 = none",
        "1G",
    ),
    Variable("TORCH_TPU_CPU_DEVICES", "devices the XLA-CPU plugin exposes", "2 (LOCAL_WORLD_SIZE if larger)"),
    Variable("LOCAL_WORLD_SIZE", "(torchrun) processes on this host: at least that many XLA-CPU devices", "unset"),
    Variable(
        "TORCH_TPU_DUMP_DIR",
        "write every compiled program's StableHLO text (program-<hash>.mlir) here, and a fused graph's ATen ops "
        "(program-<hash>.aten.txt)",
        "unset",
    ),
    Variable(
        "TORCH_TPU_PROGRAM_CACHE",
        "compiled programs kept in memory, least recently used dropped beyond it; 0 = no bound",
        "256",
    ),
    Variable("LOCAL_RANK", "(torchrun) this process's current tpu device (LOCAL_RANK % device_count)", "unset"),
    Variable(
        "TORCH_TPU_DIST_CHECK",
        "tpu_dist: ranks compare op, dtype and shapes before each collective (gloo: never through shared memory; "
        "0: no check)",
        "1",
    ),
    Variable("TORCH_TPU_DIST_CPU_ZERO_COPY", "tpu_dist on XLA-CPU: stage device buffers without PJRT transfers", "1"),
    Variable(
        "TORCH_TPU_PROFILER_OUTPUT_DIR", "TorchTPU's xprof_trace_handler: trace directory when none is given", "unset"
    ),
    Variable(
        "TORCH_TRACE",
        "PyTorch's structured trace directory; torch_tpu adds each compiled program and each fused graph's ATen "
        "ops (tlparse)",
        "unset",
    ),
    Variable(
        "TORCH_TPU_BASE_PORT", "set_tpu_launch_env (multi-host): first port of each host's worker addresses", "8070"
    ),
    Variable(
        "TORCH_TPU_DEVICES_PER_HOST",
        "set_tpu_launch_env (multi-host): worker addresses per host",
        "nproc_per_node or 8",
    ),
    Variable("TORCH_TPU_COMPILE_REPLAY", "torch.compile graphs rerun their captured program (0: op by op)", "1"),
    Variable("TORCH_TPU_HOST_KERNELS", "XLA-CPU: large matmuls/convolutions call torch's CPU kernels (XLA FFI)", "0"),
    Variable(
        "TORCH_TPU_GPU_MEMORY_FRACTION",
        "XLA-CUDA: the share of GPU memory the plugin may use (its memory_fraction option)",
        "the plugin's own",
    ),
    Variable(
        "TORCH_TPU_JAX_KERNELS",
        "torch.tpu.ops.ragged_dot/splash_sdpa on tpu run their JAX kernels when JAX imports (0: torch references)",
        "1",
    ),
    Variable(
        "TORCH_TPU_INTEGRATIONS",
        "adapt libraries with device tables of their own to tpu when they are imported (Accelerate: tpu_dist, "
        "one process per device); 0 leaves them untouched",
        "1",
    ),
    Variable(
        "TORCH_TPU_KEEP_HOST_HEAP",
        "XLA-CPU: glibc keeps freed memory for reuse (auto: when the process starts in fused mode)",
        "auto",
    ),
)


@dataclass(frozen=True)
class Platform:
    """What torch_tpu does differently per plugin kind (one row per kind; `client_options` computes the options)."""

    kind: str
    client_options: str
    host_memory: bool  # device buffers are host memory: kept host heap, host kernels and zero-copy staging apply
    cut_policy: str


PLATFORMS = (
    Platform(
        "cpu",
        "`cpu_device_count` = TORCH_TPU_CPU_DEVICES",
        True,
        "fused graphs cut where a program's compile time would exceed the host time it saves (XLA-CPU compiles "
        "and runs on the same cores)",
    ),
    Platform(
        "cuda",
        "`preallocate` = false (no 75% reservation); `memory_fraction` = TORCH_TPU_GPU_MEMORY_FRACTION when set",
        False,
        "the same cut points; on a GPU the saved host dispatch per op, not the kernels, is what fusing buys",
    ),
    Platform(
        "tpu",
        "`ml_framework_name` = PyTorch, `ml_framework_version` = torch_tpu (libtpu's own init args: LIBTPU_INIT_ARGS)",
        False,
        "the same cut points; one program per step is the aim, as TorchTPU's DeferAndFuse",
    ),
)


def platform(kind: str) -> Platform:
    """The row of PLATFORMS for a plugin kind; a plugin of unknown kind (given by path) gets no options and no
    host-memory features."""
    for row in PLATFORMS:
        if row.kind == kind:
            return row
    return Platform(kind, "none", False, "the same cut points")


def client_options(kind: str, cfg: Config) -> dict[str, object]:
    """The PJRT client-create options for a plugin kind, as the PLATFORMS table describes them."""
    if kind == "cpu":
        return {"cpu_device_count": cfg.cpu_devices}
    if kind == "cuda":
        options: dict[str, object] = {"preallocate": False}
        if cfg.gpu_memory_fraction is not None:
            options["memory_fraction"] = cfg.gpu_memory_fraction
        return options
    if kind == "tpu":
        return {"ml_framework_name": "PyTorch", "ml_framework_version": "torch_tpu"}
    return {}


def markdown() -> str:
    """The table of VARIABLES, then the PLATFORMS table, as docs/environment.md holds them."""
    lines = [
        "# Environment variables",
        "",
        "Generated from `torch_tpu/config.py` (`python -m torch_tpu.config --markdown > docs/environment.md`); "
        "`tests/runtime/test_config.py` keeps the two equal.",
        "",
        "| variable | meaning | default |",
        "|---|---|---|",
    ]
    lines += [f"| `{v.name}` | {v.meaning} | {v.default} |" for v in VARIABLES]
    lines += [
        "",
        "## Per plugin kind",
        "",
        "| plugin | client options | host-memory features (kept host heap, host kernels, zero-copy staging) | "
        "graph cuts |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {p.kind} | {p.client_options} | {'yes' if p.host_memory else 'no'} | {p.cut_policy} |" for p in PLATFORMS
    ]
    return "\n".join(lines) + "\n"


EAGER_MODES = ("debug", "strict", "fused")
FALLBACK_POLICIES = ("error", "warn", "silent")


@dataclass(frozen=True)
class Config:
    pjrt_plugin: str | None
    visible_chips: tuple[int, ...] | None
    eager_mode: str
    fallback: str
    cache_dir: str | None
    cpu_devices: int
    dump_dir: str | None = None
    local_rank: int | None = None
    dist_check: bool = True
    dist_check_shared_memory: bool = True  # ranks on one host compare through shared memory, not Gloo
    dist_cpu_zero_copy: bool = True
    program_cache: int = 256
    cache_max_bytes: int = 1 << 30
    profiler_output_dir: str | None = None
    torch_trace: str | None = None
    base_port: int = 8070
    devices_per_host: int | None = None
    compile_replay: bool = True
    host_kernels: bool = False
    jax_kernels: bool = True
    gpu_memory_fraction: float | None = None
    integrations: bool = True
    keep_host_heap: bool = True  # resolved: "auto" is on when the eager mode at start is fused


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return value


def _visible_chips(raw: str | None) -> tuple[int, ...] | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        return tuple(int(part) for part in raw.split(",") if part.strip())
    except ValueError as exc:
        raise ValueError(f"TPU_VISIBLE_CHIPS={raw!r} must be comma-separated integers") from exc


def _cache_dir(raw: str | None) -> str | None:
    if raw is not None and raw.strip().lower() in ("", "off", "0", "none"):
        return None
    if raw:
        return os.path.expanduser(raw)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_tpu")


def _int_or_none(name: str, raw: str | None) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name}={raw!r} must be an integer") from exc


def _flag(raw: str) -> bool:
    return raw.strip().lower() not in ("0", "off", "false", "no")


def load(env: dict[str, str] | None = None) -> Config:
    """Reads the configuration from `env` (default: os.environ)."""
    e = os.environ if env is None else env
    eager_mode = _eager_mode(
        e.get("TORCH_TPU_EAGER_MODE"), e.get("TORCH_TPU_DEFER_AND_FUSE"), e.get("TORCH_TPU_LAUNCH_BLOCKING")
    )
    return Config(
        pjrt_plugin=e.get("TORCH_TPU_PJRT_PLUGIN") or None,
        visible_chips=_visible_chips(e.get("TPU_VISIBLE_CHIPS")),
        eager_mode=eager_mode,
        fallback=_choice("TORCH_TPU_FALLBACK", e.get("TORCH_TPU_FALLBACK", "warn"), FALLBACK_POLICIES),
        cache_dir=_cache_dir(e.get("TORCH_TPU_CACHE_DIR")),
        cpu_devices=int(
            e.get("TORCH_TPU_CPU_DEVICES") or max(2, _int_or_none("LOCAL_WORLD_SIZE", e.get("LOCAL_WORLD_SIZE")) or 2)
        ),
        local_rank=_int_or_none("LOCAL_RANK", e.get("LOCAL_RANK")),
        dist_check=_flag(e.get("TORCH_TPU_DIST_CHECK", "1")),
        dist_check_shared_memory=e.get("TORCH_TPU_DIST_CHECK", "1").strip().lower() != "gloo",
        dist_cpu_zero_copy=_flag(e.get("TORCH_TPU_DIST_CPU_ZERO_COPY", "1")),
        dump_dir=os.path.expanduser(e["TORCH_TPU_DUMP_DIR"]) if e.get("TORCH_TPU_DUMP_DIR") else None,
        program_cache=_program_cache(e.get("TORCH_TPU_PROGRAM_CACHE")),
        cache_max_bytes=_byte_size(
            "TORCH_TPU_CACHE_MAX_BYTES", e.get("TORCH_TPU_CACHE_MAX_BYTES"), Config.cache_max_bytes
        ),
        profiler_output_dir=e.get("TORCH_TPU_PROFILER_OUTPUT_DIR") or None,
        torch_trace=e.get("TORCH_TRACE") or None,
        base_port=_int_or_none("TORCH_TPU_BASE_PORT", e.get("TORCH_TPU_BASE_PORT")) or Config.base_port,
        devices_per_host=_int_or_none("TORCH_TPU_DEVICES_PER_HOST", e.get("TORCH_TPU_DEVICES_PER_HOST")),
        compile_replay=_flag(e.get("TORCH_TPU_COMPILE_REPLAY", "1")),
        host_kernels=_flag(e.get("TORCH_TPU_HOST_KERNELS", "0")),
        jax_kernels=_flag(e.get("TORCH_TPU_JAX_KERNELS", "1")),
        gpu_memory_fraction=_fraction("TORCH_TPU_GPU_MEMORY_FRACTION", e.get("TORCH_TPU_GPU_MEMORY_FRACTION")),
        integrations=_flag(e.get("TORCH_TPU_INTEGRATIONS", "1")),
        keep_host_heap=_keep_host_heap(e.get("TORCH_TPU_KEEP_HOST_HEAP", "auto"), eager_mode),
    )


def _fraction(name: str, raw: str | None) -> float | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} must be a number in (0, 1]") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name}={raw!r} must be in (0, 1]")
    return value


def _eager_mode(mode: str | None, defer_and_fuse: str | None, launch_blocking: str | None) -> str:
    """TORCH_TPU_EAGER_MODE, or TorchTPU's switches (LAUNCH_BLOCKING=1: debug; DEFER_AND_FUSE=1/0: fused/strict);
    when both are set they must agree."""
    anchor = None
    if launch_blocking is not None and _flag(launch_blocking):
        anchor = "debug"
    elif defer_and_fuse is not None and defer_and_fuse.strip() != "":
        anchor = "fused" if _flag(defer_and_fuse) else "strict"
    if mode is None or mode.strip() == "":
        return anchor or "fused"
    chosen = _choice("TORCH_TPU_EAGER_MODE", mode, EAGER_MODES)
    if anchor is not None and anchor != chosen:
        raise ValueError(
            f"TORCH_TPU_EAGER_MODE={mode!r} and TorchTPU's TORCH_TPU_DEFER_AND_FUSE/TORCH_TPU_LAUNCH_BLOCKING "
            f"(which ask for {anchor!r}) disagree: set one of them"
        )
    return chosen


def _keep_host_heap(raw: str, eager_mode: str) -> bool:
    # One shared arena makes strict/debug eager's host thread and XLA's workers contend for the allocator lock
    # (per-op dispatch ~2x), so "auto" keeps the heap only for fused eager, where it saves the page faults.
    if raw.strip().lower() == "auto":
        return eager_mode == "fused"
    return _flag(raw)


def _program_cache(raw: str | None) -> int:
    value = _int_or_none("TORCH_TPU_PROGRAM_CACHE", raw)
    if value is None:
        return Config.program_cache
    if value < 0:
        raise ValueError(f"TORCH_TPU_PROGRAM_CACHE={raw!r} must be >= 0 (0 keeps every program)")
    return value


def _byte_size(name: str, raw: str | None, default: int) -> int:
    """A byte count: digits with an optional K, M, G or T suffix (powers of 1024)."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip().upper().removesuffix("B").removesuffix("I")
    scale = 1
    if text and text[-1] in "KMGT":
        scale = 1 << (10 * ("KMGT".index(text[-1]) + 1))
        text = text[:-1]
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a size (e.g. 1073741824, 512M, 2G)") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r} must be >= 0 (0 means no bound)")
    return int(value * scale)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m torch_tpu.config --markdown")
    sys.stdout.write(markdown())
