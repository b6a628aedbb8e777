"""`python -m torch_tpu.info`: what torch_tpu runs on — plugin, platform, devices, memory, compile cache."""

from __future__ import annotations

import sys

from torch_tpu import config, runtime


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
    lines.append(f"PJRT API:     {client.api_version} (built against {_header_version()})")
    xla = client.plugin_attributes.get("xla_version")
    if xla:
        lines.append(f"XLA version:  {xla}")
    lines.append(f"platform:     {client.platform_name} ({client.platform_version})")
    lines.append(f"eager mode:   {cfg.eager_mode}    fallback: {cfg.fallback}")
    lines.append(f"devices:      {len(rt.devices)}")
    for d in rt.devices:
        mem = client.memory_stats(d["index"])
        mem_text = f"{mem['bytes_in_use']} B in use" if mem["available"] else "memory stats not reported by plugin"
        lines.append(f"  tpu:{d['index']}  {d['kind']:<12} {d['description']}  ({mem_text})")
    from torch_tpu import _C

    c = _C.runtime_counters()
    lines.append(f"compile cache: {len(rt.cache)} programs in memory, dir={rt.cache.directory or 'off'}")
    lines.append(
        f"  compiles={c['compiles']} ({c['compile_ns'] / 1e6:.0f} ms)  hits={c['cache_hits']}  "
        f"misses={c['cache_misses']}  disk hits={c['disk_cache_hits']}  executions={c['executions']}"
    )
    return "\n".join(lines)


def _header_version() -> str:
    from torch_tpu import _C

    return _C.pjrt_header_version()


if __name__ == "__main__":
    print(report())
    sys.exit(0)
