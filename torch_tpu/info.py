"""`python -m torch_tpu.info`: what torch_tpu runs on — plugin, platform, devices, memory, compile cache.

`python -m torch_tpu.info --ops`: the op registry instead — every overload a lowering row serves (named by its row
or derived from PyTorch's schemas), and the ATen ops with a CPU kernel that still run on tpu through the CPU
fallback."""

from __future__ import annotations

import sys

from torch_tpu import config, plugins, runtime


def report() -> str:
    cfg = config.load()
    lines = ["torch_tpu device report", "======================="]
    try:
        rt = runtime.get()
    except runtime.PluginUnavailableError as exc:
        lines.append(f"status: unavailable\n{exc}")
        return "\n".join(lines)
    client = rt.client
    lines.append(f"plugin:       {client.plugin_path}")
    lines.append(f"  kind {rt.plugin_kind}: {rt.chosen_because}")
    lines.extend(f"  passed over: {path}: {why}" for path, why in rt.rejected)
    seen = {p.path for p in plugins.installed()}
    lines.append(f"  installed:   {', '.join(sorted(seen)) or 'none'}")
    lines.append(f"PJRT API:     {client.api_version} (built against {_header_version()})")
    xla = client.plugin_attributes.get("xla_version")
    if xla:
        lines.append(f"XLA version:  {xla}")
    lines.append(f"platform:     {client.platform_name} ({client.platform_version})")
    lines.append(f"eager mode:   {cfg.eager_mode}    fallback: {cfg.fallback}")
    lines.append(f"devices:      {len(rt.devices)}")
    lines.append(f"host heap:    {rt.host_heap}")
    from torch_tpu import _C

    for torch_index, d in enumerate(rt.devices):
        stats = _C._memory_stats(torch_index)
        capacity = _C._device_capacity(torch_index) / 2**30
        current, peak = stats["allocated_bytes.all.current"] / 2**20, stats["allocated_bytes.all.peak"] / 2**20
        lines.append(
            f"  tpu:{torch_index}  {d['kind']:<6} {d['description']:<16} capacity {capacity:.1f} GiB, "
            f"allocated {current:.2f} MiB (peak {peak:.2f} MiB)"
        )
    c = _C.runtime_counters()
    lines.append(f"compile cache: {len(rt.cache)} programs in memory, dir={rt.cache.directory or 'off'}")
    lines.append(
        f"  compiles={c['compiles']} ({c['compile_ns'] / 1e6:.0f} ms)  hits={c['cache_hits']}  "
        f"misses={c['cache_misses']}  disk hits={c['disk_cache_hits']}  executions={c['executions']}"
    )
    lines.append(
        f"transfers:    {c['host_to_device']} to device ({c['host_to_device_bytes'] / 2**20:.1f} MiB), "
        f"{c['device_to_host']} to host ({c['device_to_host_bytes'] / 2**20:.1f} MiB); live buffers {c['live_buffers']}"
    )
    lowered, host, fallback = _C._lowered_counts(), _C._host_op_counts(), _C._fallback_counts()
    fallback_text = ", ".join(f"{k} x{v}" for k, v in sorted(fallback.items()))
    lines.append(
        f"ops:          {sum(lowered.values())} lowered ({len(lowered)} kinds), {sum(host.values())} on host by "
        f"design, {sum(fallback.values())} CPU fallbacks" + (f": {fallback_text}" if fallback else "")
    )
    return "\n".join(lines)


def _header_version() -> str:
    from torch_tpu import _C

    return _C.pjrt_header_version()


def ops_report() -> str:
    import torch

    from torch_tpu import _C

    served = _C._lowered_ops()
    derived = sorted(name for name, from_schema in served if from_schema)
    lines = [f"lowered overloads: {len(served)} ({len(derived)} derived from the schemas)"]
    lines += [f"  {name}{'  (derived)' if from_schema else ''}" for name, from_schema in sorted(served)]
    unknown = _C._unknown_row_names()
    if unknown:
        lines.append(f"rows naming overloads PyTorch does not have: {', '.join(unknown)}")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    fallback = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        try:
            has(name, "CPU")
        except RuntimeError:  # a TorchScript builtin, not a dispatcher operator
            continue
        composite = has(name, "CompositeImplicitAutograd") or has(name, "CompositeExplicitAutograd")
        if has(name, "CPU") and not has(name, "PrivateUse1") and not composite:
            fallback.append(name[len("aten::") :])
    lines.append(f"ATen overloads with a CPU kernel that run on the CPU fallback: {len(fallback)}")
    lines += [f"  {name}" for name in sorted(fallback)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(ops_report() if sys.argv[1:] == ["--ops"] else report())
    sys.exit(0)
