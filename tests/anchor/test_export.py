"""torch_tpu._internal.export: torch.export programs as StableHLO modules, run through torch_tpu's runtime and through
JAX's CPU backend, against PyTorch eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torch_tpu._internal.export import exported_to_mlir, fx_to_mlir

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(y.flatten(1))


class GptBlock(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def _trained_bn(model: SmallCnn) -> SmallCnn:
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, 8, 8))  # running statistics that are not the defaults
    return model.eval()


def _check(model: nn.Module, *inputs: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    want = model(*inputs)
    exported = torch.export.export(model, inputs)
    module = exported_to_mlir(exported)
    text = module.serialize_text()
    assert "func.func public @main(" in text and text.count("func.func public") == 1
    # through torch_tpu's own runtime
    got = module(*[t.to("tpu") for t in module.state], *[t.to("tpu") for t in inputs])
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol)  # the model's own output structure
    # through JAX: the portable artifact inside a jax.export.Exported, deserialized and run on JAX's CPU backend
    # (64-bit arguments such as BatchNorm's num_batches_tracked need JAX's x64 mode)
    with jax.enable_x64(True):
        blob = module.jax_exported().serialize()
        restored = jax.export.deserialize(blob)
        arrays = [jnp.asarray(t.detach().numpy()) for t in [*module.state, *inputs]]
        out = restored.call(*arrays)
    out = out[0] if isinstance(out, (tuple, list)) else out
    in_jax = torch.from_numpy(jax.device_get(out).copy())
    assert float((in_jax - want).abs().max()) <= atol + rtol * float(want.abs().max())


def test_cnn_with_batchnorm_in_eval() -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        _check(_trained_bn(SmallCnn()), torch.randn(2, 3, 8, 8))


def test_gpt_block() -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        _check(GptBlock().eval(), torch.randn(2, 6, 32), rtol=1e-4, atol=1e-5)


def test_hugging_face_llama() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32, use_cache=False,
    )  # fmt: skip
    model = transformers.LlamaModel(config).eval()

    class Hidden(nn.Module):  # the last hidden state, a tensor
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=ids).last_hidden_state

    with torch.no_grad():
        _check(Hidden(), torch.randint(0, 64, (2, 7)), rtol=1e-4, atol=1e-5)


def test_bytecode_and_portable_artifact_parse() -> None:
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    module = exported_to_mlir(torch.export.export(model, (torch.randn(2, 4),)))
    bytecode = module.serialize_bytecode()
    assert bytecode[:4] == b"ML\xefR"  # MLIR bytecode's magic number
    with mlir.make_ir_context():
        assert "func.func public @main" in str(ir.Module.parse(bytecode))
    assert module.serialize_portable_artifact()[:4] == b"ML\xefR"


def test_fx_to_mlir_of_a_traced_function() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x @ y).softmax(-1), x.sum(0)

    gm = torch.fx.symbolic_trace(f)
    x, y = torch.randn(3, 5), torch.randn(5, 4)
    module = fx_to_mlir(gm, [x, y])
    a, b = module(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(a.cpu(), (x @ y).softmax(-1))
    torch.testing.assert_close(b.cpu(), x.sum(0))
    assert [s for s, _ in module.in_types] == [[3, 5], [5, 4]]


def test_fx_to_mlir_of_an_in_place_update() -> None:
    def f(x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        acc.add_(x.sum())
        return x * 2 + acc

    x = torch.randn(3)
    module = fx_to_mlir(torch.fx.symbolic_trace(f), [x, torch.zeros(3)])
    assert "aliasing" not in module.serialize_text()  # donation is the runner's choice, not the artifact's
    got = module(x.to("tpu"), torch.zeros(3).to("tpu"))
    torch.testing.assert_close(got.cpu(), x * 2 + x.sum())


def test_dynamic_dimensions_are_refused_clearly() -> None:
    model = nn.Linear(4, 2)
    batch = torch.export.Dim("batch")
    exported = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
    with pytest.raises(NotImplementedError, match="symbolic dimension"):
        exported_to_mlir(exported)
