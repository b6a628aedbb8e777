"""Smoke test of an installed torch_tpu wheel, run from outside the source tree in a fresh environment: autoload by
`import torch` alone, a tensor on tpu equal to CPU, three training steps equal to CPU, and torch.compile."""

from __future__ import annotations

import os
import sys

import torch


def main() -> int:
    import torch_tpu

    where = os.path.dirname(torch_tpu.__file__)
    assert "site-packages" in where, f"torch_tpu imported from {where}, not from the installed wheel"
    x = torch.arange(6.0).view(2, 3)
    torch.testing.assert_close((x.to("tpu") * 2 + 1).cpu(), x * 2 + 1)

    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    tpu = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (cpu, tpu)]
    data, target = torch.randn(16, 3), torch.randn(16, 1)
    for _ in range(3):
        for model, opt, device in ((cpu, opts[0], "cpu"), (tpu, opts[1], "tpu")):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data.to(device)), target.to(device))
            loss.backward()
            opt.step()
    for a, b in zip(cpu.parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)

    compiled = torch.compile(lambda t: torch.tanh(t) @ t.T, backend="tpu")
    y = torch.randn(4, 4)
    torch.testing.assert_close(compiled(y.to("tpu")).cpu(), torch.tanh(y) @ y.T, rtol=1e-5, atol=1e-6)
    print(f"wheel ok: torch_tpu from {where}, device {torch.tpu.get_device_name()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
