"""`_DeviceModule`: the device-module class PyTorch's own torch/tpu shim delegates to."""

from __future__ import annotations

from torch_tpu import device_module


class _DeviceModule:
    """Static views of torch.tpu's functions, for callers that expect a class."""

    is_available = staticmethod(device_module.is_available)
    is_initialized = staticmethod(device_module.is_initialized)
    device_count = staticmethod(device_module.device_count)
    current_device = staticmethod(device_module.current_device)
    set_device = staticmethod(device_module.set_device)
    synchronize = staticmethod(device_module.synchronize)
    get_device_name = staticmethod(device_module.get_device_name)
    get_device_properties = staticmethod(device_module.get_device_properties)
    manual_seed = staticmethod(device_module.manual_seed)
    manual_seed_all = staticmethod(device_module.manual_seed_all)
    get_rng_state = staticmethod(device_module.get_rng_state)
    set_rng_state = staticmethod(device_module.set_rng_state)
    memory_allocated = staticmethod(device_module.memory_allocated)
    memory_stats = staticmethod(device_module.memory_stats)
    current_stream = staticmethod(device_module.current_stream)
    get_amp_supported_dtype = staticmethod(device_module.get_amp_supported_dtype)
    Stream = device_module.Stream
    Event = device_module.Event


DeviceModule = _DeviceModule  # TorchTPU's name for it (torch_tpu.api._device_module.DeviceModule)
