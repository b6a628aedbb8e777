"""TorchTPU's execution-mode module: `EagerMode`, the module property `eager_mode`, `set_eager_mode(mode)` and the
switches `enable_cpu_fallback` and `disable_inplace_buffer_donation`.

The modes are torch_tpu's three eager modes under TorchTPU's names: DEFER_AND_FUSE is ``fused`` (torch_tpu's default,
where TorchTPU's default is DEFER_NEVER), DEFER_NEVER is ``strict`` and DEFER_NEVER_AND_LAUNCH_BLOCKING is ``debug``.
OPTIMIZED (a name TorchTPU's guide uses) means DEFER_AND_FUSE, and DEFAULT the mode a process starts in here (fused).
"""

from __future__ import annotations

import enum
import sys
import types

from torch_tpu import _C
from torch_tpu.eager import ModeSwitch, get_eager_mode
from torch_tpu.eager import set_eager_mode as _set_mode


class EagerMode(enum.Enum):
    DEFER_AND_FUSE = "fused"
    DEFER_NEVER = "strict"
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "debug"
    OPTIMIZED = "fused"  # an alias of DEFER_AND_FUSE
    DEFAULT = "fused"  # torch_tpu's default mode (an alias of DEFER_AND_FUSE)


def set_eager_mode(mode: EagerMode | str) -> ModeSwitch:
    """Sets the eager mode now; used with `with`, restores the previous mode when the block ends."""
    return _set_mode(mode.value if isinstance(mode, EagerMode) else mode)


class _ExecutionModeModule(types.ModuleType):
    """The module's properties: reading them asks the engine, setting them changes it."""

    @property
    def eager_mode(self) -> EagerMode:
        return EagerMode(get_eager_mode())

    @eager_mode.setter
    def eager_mode(self, mode: EagerMode | str) -> None:
        set_eager_mode(mode)

    @property
    def enable_cpu_fallback(self) -> bool:
        return _C._get_fallback_policy() != "error"

    @enable_cpu_fallback.setter
    def enable_cpu_fallback(self, on: bool) -> None:
        from torch_tpu import config

        configured = config.load().fallback
        _C._set_fallback_policy((configured if configured != "error" else "warn") if on else "error")

    @property
    def disable_inplace_buffer_donation(self) -> bool:
        return not _C._inplace_donation()

    @disable_inplace_buffer_donation.setter
    def disable_inplace_buffer_donation(self, off: bool) -> None:
        _C._set_inplace_donation(not off)


sys.modules[__name__].__class__ = _ExecutionModeModule

__all__ = ["EagerMode", "set_eager_mode"]  # and the module properties above
