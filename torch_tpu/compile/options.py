"""The `options` of the "tpu" backend, under the names TorchTPU (Google's torch-tpu) gives them, so that
`torch.compile(fn, backend="tpu", options={...})` written for it runs here. What each one does on this backend:

- ``async_compile`` (bool, default False): the first call of each newly compiled graph is a warm-up: it is traced
  and recorded once on copies of its inputs, and its program goes to the compile cache's background threads instead
  of running (no input, parameter, buffer or RNG state changes); the call raises `AsyncCompilationSubmitted`
  instead of returning. Later calls run normally, waiting for the program if it is still being compiled
  (`torch_tpu.compile.warmup`).
- ``num_dynamic_buckets`` (int 1..8) and ``bucket_size`` (int > 0, default 128): for graphs with dynamic sizes whose
  padding `torch_tpu.compile.bucketing` proves safe, sizes are padded up to one of `num_dynamic_buckets` buckets
  `bucket_size` apart, the first being the smallest multiple of `bucket_size` that holds the first size seen; a
  larger size runs unpadded (a program of its own). When neither is given, our own ladder applies (32, 64, 128,
  256, 512, then powers of two).
- ``serializable`` (bool, default True): the compiled callable carries ``.serialize()``, so torch's precompile
  (``aot_compile`` → ``save_compiled_function`` → ``torch.compiler.load_compiled_function``) can save and load it
  (see `torch_tpu.compile.serialize`; static shapes only); False leaves it off.
- ``debug_callback`` (callable taking one `TpuCompileDebug`): called once a graph is compiled, with the Dynamo graph's
  code and AOTAutograd's forward code; the backward graph's code is added to the same object when the backward is
  compiled (at the first backward call).
- ``custom_module_name`` (or ``name``; str): checked, otherwise no effect: our programs are named by the engine after
  their first ops and a hash of their text.

Other keys are ignored, as TorchTPU ignores them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

MAX_DYNAMIC_BUCKETS = 8
DEFAULT_BUCKET_SIZE = 128

# The keys TorchTPU's backend reads from `options` ("name" is its older spelling of "custom_module_name").
OPTION_NAMES = frozenset(
    {
        "async_compile",
        "num_dynamic_buckets",
        "bucket_size",
        "serializable",
        "debug_callback",
        "custom_module_name",
        "name",
    }
)


@dataclasses.dataclass
class TpuCompileDebug:
    """What one compilation of the "tpu" backend produced, filled in as it happens.

    The StableHLO lists stay empty here: our programs are built by the engine when the graph runs, not when it is
    compiled; `torch_tpu._internal.sync.computation_mlir` shows a pending program instead.
    """

    pre_autograd_fx_code: list[str] = dataclasses.field(default_factory=list)
    pre_autograd_fx_readable: list[str] = dataclasses.field(default_factory=list)
    post_autograd_fx_forward_code: list[str] = dataclasses.field(default_factory=list)
    post_autograd_fx_forward_readable: list[str] = dataclasses.field(default_factory=list)
    post_autograd_fx_backward_code: list[str] = dataclasses.field(default_factory=list)
    post_autograd_fx_backward_readable: list[str] = dataclasses.field(default_factory=list)
    stablehlo_forward_text: list[str] = dataclasses.field(default_factory=list)
    stablehlo_backward_text: list[str] = dataclasses.field(default_factory=list)
    compiled_executables: list[Any] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        parts = [
            ("Dynamo graph", self.pre_autograd_fx_code),
            ("AOTAutograd forward", self.post_autograd_fx_forward_code),
            ("AOTAutograd backward", self.post_autograd_fx_backward_code),
            ("StableHLO forward", self.stablehlo_forward_text),
            ("StableHLO backward", self.stablehlo_backward_text),
        ]
        text = [f"--- {title} ---\n" + "\n".join(s.strip() for s in items) for title, items in parts if items]
        return "\n\n".join(text) or "TpuCompileDebug(nothing recorded)"

    def __repr__(self) -> str:
        return (
            f"TpuCompileDebug(pre_fx={len(self.pre_autograd_fx_code)}, "
            f"post_fwd_fx={len(self.post_autograd_fx_forward_code)}, "
            f"post_bwd_fx={len(self.post_autograd_fx_backward_code)}, "
            f"executables={len(self.compiled_executables)})"
        )


@dataclasses.dataclass(frozen=True)
class BackendOptions:
    """The checked options of one compilation."""

    async_compile: bool = False
    num_dynamic_buckets: int | None = None  # None (and bucket_size None): our own bucket ladder
    bucket_size: int | None = None
    serializable: bool = True
    debug_callback: Callable[[TpuCompileDebug], Any] | None = None
    custom_module_name: str | None = None

    @property
    def ladder(self) -> tuple[int, int] | None:
        """(number of buckets, step) when TorchTPU's bucketing was asked for, else None."""
        if self.num_dynamic_buckets is None and self.bucket_size is None:
            return None
        return (self.num_dynamic_buckets or 1, self.bucket_size or DEFAULT_BUCKET_SIZE)


class StepLadder:
    """TorchTPU's buckets (backend options ``num_dynamic_buckets``, ``bucket_size``): `count` sizes `step` apart,
    the first the smallest multiple of `step` that holds the first length asked for. A length beyond the last
    bucket keeps its own size (runs unpadded)."""

    def __init__(self, count: int, step: int) -> None:
        self.count, self.step = count, step
        self.first: int | None = None

    def __call__(self, length: int) -> int:
        if self.first is None:
            self.first = max(self.step, -(-length // self.step) * self.step)
        if length <= self.first:
            return self.first
        size = -(-length // self.step) * self.step
        return size if size <= self.first + (self.count - 1) * self.step else length


def _flag(options: Mapping[str, Any], key: str, default: bool) -> bool:
    value = options.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TypeError(f"`{key}` must be a bool, got {value!r}")
    return value


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def parse(options: Mapping[str, Any] | None) -> BackendOptions:
    """Checks `options` (TorchTPU's keys; others ignored) and returns them; ValueError/TypeError on a bad value."""
    if not options:
        return BackendOptions()
    if not isinstance(options, Mapping):
        raise TypeError(f"`options` must be a dict, got {type(options).__name__}")
    buckets = options.get("num_dynamic_buckets")
    if buckets is not None and not (_positive_int(buckets) and buckets <= MAX_DYNAMIC_BUCKETS):
        raise ValueError(f"`num_dynamic_buckets` must be an integer between 1 and {MAX_DYNAMIC_BUCKETS}, got {buckets}")
    size = options.get("bucket_size")
    if size is not None and not _positive_int(size):
        raise ValueError(f"`bucket_size` must be a positive integer, got {size}")
    callback = options.get("debug_callback")
    if callback is not None and not callable(callback):
        raise TypeError("'debug_callback' must be callable")
    name = options.get("custom_module_name") or options.get("name")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"`custom_module_name` must be a str, got {name!r}")
    return BackendOptions(
        async_compile=_flag(options, "async_compile", False),
        num_dynamic_buckets=buckets,
        bucket_size=size,
        serializable=_flag(options, "serializable", True),
        debug_callback=callback,
        custom_module_name=name or None,
    )


def split(options: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the TorchTPU keys of `options`, the rest), for `torch.compile(model, options=...)` without a backend."""
    ours = {k: v for k, v in (options or {}).items() if k in OPTION_NAMES}
    rest = {k: v for k, v in (options or {}).items() if k not in OPTION_NAMES}
    return ours, rest
