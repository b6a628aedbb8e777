"""Runtime-level demo: the devices of the PJRT plugin, one compiled program (an MLP layer), and its timings."""

from __future__ import annotations

import time

import numpy as np

from torch_tpu import _C, runtime


def mlp_layer_program(batch: int, d_in: int, d_out: int) -> str:
    b = _C.HloBuilder()
    x, w, bias = b.arg("f32", [batch, d_in]), b.arg("f32", [d_in, d_out]), b.arg("f32", [d_out])
    y = b.dot_general(x, w, [], [], [1], [0], "f32", [batch, d_out])
    y = b.binary("stablehlo.add", y, b.broadcast_in_dim(bias, [batch, d_out], [1]))
    relu = b.binary("stablehlo.maximum", y, b.constant(0.0, "f32", [batch, d_out]))
    return b.build([relu])


def main() -> None:
    rt = runtime.get()
    print(f"platform {rt.client.platform_name}, {len(rt.devices)} device(s):")
    for d in rt.devices:
        print(f"  tpu:{d['index']}  {d['description']}")
    batch, d_in, d_out = 64, 256, 128
    text = mlp_layer_program(batch, d_in, d_out)
    t0 = time.perf_counter()
    exe = rt.cache.get_or_compile(text)
    t1 = time.perf_counter()
    rt.cache.get_or_compile(text)
    t2 = time.perf_counter()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    w = rng.standard_normal((d_in, d_out)).astype(np.float32)
    bias = rng.standard_normal(d_out).astype(np.float32)
    args = [rt.client.buffer_from_host(a, "f32") for a in (x, w, bias)]
    rt.client.execute(exe, args)  # warm-up
    runs = 50
    t3 = time.perf_counter()
    for _ in range(runs):
        (out,) = rt.client.execute(exe, args)
    t4 = time.perf_counter()
    result = np.frombuffer(out.to_bytes(), np.float32).reshape(batch, d_out)
    expected = np.maximum(x @ w + bias, 0)
    err = float(np.abs(result - expected).max())
    print(f"compile (or disk-cache load): {1e3 * (t1 - t0):.1f} ms; memory-cache hit: {1e6 * (t2 - t1):.0f} us")
    print(
        f"execute MLP layer {batch}x{d_in} @ {d_in}x{d_out}: {1e6 * (t4 - t3) / runs:.0f} us/run; max |err| = {err:.2e}"
    )
    if err > 1e-3:
        raise SystemExit("result does not match numpy")


if __name__ == "__main__":
    main()
