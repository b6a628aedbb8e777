"""Which PJRT plugin torch_tpu runs on: discovery, short names, and the reasons a plugin was passed over.

Without `TORCH_TPU_PJRT_PLUGIN`, the installed plugin wheels are tried in this order, each only where its hardware
is present: libtpu (PyPI `libtpu`: `libtpu/libtpu.so`; a TPU host has `/dev/accel*` or `/dev/vfio/<n>`), XLA-CUDA
(PyPI `jax-cuda13-pjrt` / `jax-cuda12-pjrt`: `jax_plugins/xla_cuda1x/xla_cuda_plugin.so`; an NVIDIA host has
`/dev/nvidiactl`), then XLA-CPU (`xla-cpu-pjrt`: `xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so`), which always applies.
A plugin that is installed but whose hardware is absent, or that fails to load (wrong PJRT API major version, load
error), is recorded with the reason and the next one is tried; `python -m torch_tpu.info` lists them.

`TORCH_TPU_PJRT_PLUGIN` is either a path to a plugin .so or a short name: `tpu`, `cuda` or `cpu` (the installed
plugin of that kind, used even where the hardware check would pass it over).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("tpu", "cuda", "cpu")

# (kind, path under a sys.path entry, the wheel that installs it), in the order they are preferred
_LAYOUT = (
    ("tpu", os.path.join("libtpu", "libtpu.so"), "libtpu"),
    ("cuda", os.path.join("jax_plugins", "xla_cuda13", "xla_cuda_plugin.so"), "jax-cuda13-pjrt"),
    ("cuda", os.path.join("jax_plugins", "xla_cuda12", "xla_cuda_plugin.so"), "jax-cuda12-pjrt"),
    ("cpu", os.path.join("xla_plugins", "xla_cpu_pjrt", "xla_cpu_pjrt.so"), "xla-cpu-pjrt"),
)
_EXTRA = {"tpu": "torch_tpu[tpu]", "cuda": "torch_tpu[cuda12] or torch_tpu[cuda13]", "cpu": "xla-cpu-pjrt==0.0.1"}


@dataclass(frozen=True)
class Plugin:
    kind: str  # "tpu", "cuda", "cpu", or "path" (given by path)
    path: str
    source: str  # the wheel that installed it, or the variable that named it


@dataclass(frozen=True)
class Choice:
    """The plugins to try, in order, and those passed over before trying (with the reason)."""

    candidates: list[Plugin]
    passed_over: list[tuple[Plugin, str]]
    why: str  # how the candidates were chosen


def kind_of(path: str) -> str:
    """The kind of a plugin given by path, from its file name (before it is loaded)."""
    name = os.path.basename(path).lower()
    if "tpu" in name:
        return "tpu"
    if "cuda" in name or "gpu" in name:
        return "cuda"
    return "cpu" if "cpu" in name else "path"


def installed(search_path: Sequence[str] | None = None) -> list[Plugin]:
    """Every plugin .so the known wheels put under an entry of `search_path` (sys.path), in preference order."""
    found, seen = [], set()
    for kind, rel, wheel in _LAYOUT:
        for root in search_path if search_path is not None else sys.path:
            path = os.path.join(root or ".", rel)
            real = os.path.realpath(path)
            if real not in seen and os.path.isfile(path):
                seen.add(real)
                found.append(Plugin(kind, path, f"{wheel} wheel"))
    return found


def hardware_present(kind: str, dev: str = "/dev") -> tuple[bool, str]:
    """Whether the devices a plugin kind drives are visible, and what was looked at."""
    if kind == "tpu":
        nodes = glob.glob(os.path.join(dev, "accel*")) + glob.glob(os.path.join(dev, "vfio", "[0-9]*"))
        return bool(nodes), f"{dev}/accel* or {dev}/vfio/<n>"
    if kind == "cuda":
        nodes = glob.glob(os.path.join(dev, "nvidiactl")) + glob.glob(os.path.join(dev, "nvidia[0-9]*"))
        return bool(nodes), f"{dev}/nvidiactl or {dev}/nvidia<n>"
    return True, "none needed"


def choose(setting: str | None, search_path: Sequence[str] | None = None, dev: str = "/dev") -> Choice:
    """The plugins to try for `TORCH_TPU_PJRT_PLUGIN=setting` (None: discovery), in order."""
    found = installed(search_path)
    if setting and setting.lower() in KINDS:
        kind = setting.lower()
        of_kind = [p for p in found if p.kind == kind]
        if not of_kind:
            raise LookupError(
                f"TORCH_TPU_PJRT_PLUGIN={setting}: no {kind} PJRT plugin is installed "
                f"(looked for {', '.join(rel for k, rel, _ in _LAYOUT if k == kind)} on sys.path). "
                f"Fix: pip install {_EXTRA[kind]}"
            )
        return Choice(of_kind, [], f"TORCH_TPU_PJRT_PLUGIN={setting}")
    if setting:
        return Choice([Plugin(kind_of(setting), setting, "TORCH_TPU_PJRT_PLUGIN")], [], "TORCH_TPU_PJRT_PLUGIN path")
    candidates, passed = [], []
    for p in found:
        present, looked = hardware_present(p.kind, dev)
        if present:
            candidates.append(p)
        else:
            passed.append((p, f"no {p.kind} device ({looked} absent)"))
    return Choice(candidates, passed, "discovery (tpu, then cuda, then cpu; each where its hardware is present)")
