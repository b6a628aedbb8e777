"""torch.tpu.pallas: the names exist and raise NotImplementedError pointing at issue 31, without importing JAX."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import torch_tpu  # noqa: F401


def test_jax_op_raises_in_both_forms() -> None:
    with pytest.raises(NotImplementedError, match=r"torch.tpu.pallas.jax_op is not implemented .*issue 31"):
        torch.tpu.pallas.jax_op("mylib::add", lambda x: x)
    with pytest.raises(NotImplementedError, match="issue 31"):
        torch.tpu.pallas.jax_op("mylib::add")  # the decorator form fails at the call, not later


def test_get_pallas_mesh_raises() -> None:
    with pytest.raises(NotImplementedError, match=r"get_pallas_mesh is not implemented .*issue 31"):
        torch.tpu.pallas.get_pallas_mesh(("x",))


def test_no_jax_import() -> None:
    code = (
        "import sys, torch, torch_tpu; torch.tpu.pallas.jax_op; torch.tpu.pallas.get_pallas_mesh; "
        "import torch_tpu._internal.pallas; print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False"
