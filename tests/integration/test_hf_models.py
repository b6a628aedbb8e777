"""Hugging Face architectures people fine-tune (tiny configs; the hub is not needed) train and generate on tpu exactly
as on the CPU, with zero CPU fallbacks.

Training uses test_model_families' harness: the same steps on both devices from the same weights and data; losses,
first gradients and final parameters must agree. Generation is greedy decoding with the KV cache, which grows by one
position per token: the tokens must be CPU's, and a second identical call must need no new program.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import torch_tpu
from tests.integration.test_model_families import _adamw, _compare
from torch_tpu import runtime

transformers = pytest.importorskip("transformers")

VOCAB = 97
SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}


def _llama() -> torch.nn.Module:
    # Grouped-query attention, rotary positions, RMSNorm, SwiGLU, tied input/output embeddings.
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, num_key_value_heads=2, tie_word_embeddings=True, **SMALL)
    return transformers.LlamaForCausalLM(cfg)


def _t5() -> torch.nn.Module:
    # Encoder-decoder with relative position buckets and cross-attention.
    cfg = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_ff=64, num_layers=2, num_heads=4, d_kv=8, dropout_rate=0.0,
        decoder_start_token_id=0,
    )  # fmt: skip
    return transformers.T5ForConditionalGeneration(cfg)


def _bert() -> torch.nn.Module:
    # Post-norm encoder, token types, masked-LM head tied to the word embeddings.
    cfg = transformers.BertConfig(
        vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=32, **SMALL
    )
    return transformers.BertForMaskedLM(cfg)


MODELS: dict[str, Callable[[], torch.nn.Module]] = {"llama": _llama, "t5": _t5, "bert": _bert}


def _tokens(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(MODELS))
def test_hf_model_trains_like_cpu(name):
    torch.manual_seed(0)
    model = MODELS[name]()
    ids = _tokens(2, 12, seed=1)
    batch = {"ids": ids, "mask": torch.ones_like(ids)}
    fallbacks = _compare(
        model, batch, lambda m, d: m(input_ids=d["ids"], attention_mask=d["mask"], labels=d["ids"]).loss, _adamw
    )
    assert fallbacks == {}, fallbacks


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_hf_greedy_generate_matches_cpu(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    prompt = _tokens(2, 7, seed=3)
    kwargs = {"max_new_tokens": 10, "do_sample": False, "pad_token_id": 0}
    want = model.generate(prompt, **kwargs)
    model.to("tpu")
    torch_tpu.reset_op_counts()
    # Strict and debug decoding make a program per op and cache length, more than the in-memory cache's default
    # bound keeps (the least recently used go, and come back from the disk cache); here every program stays.
    cache = runtime.get().cache
    bound, cache.capacity = cache.capacity, 0
    try:
        first = model.generate(prompt.to("tpu"), **kwargs).cpu()
        misses = torch_tpu.metrics()["cache_misses"]  # programs not in memory: compiled or read from the disk cache
        again = model.generate(prompt.to("tpu"), **kwargs).cpu()
    finally:
        cache.capacity = bound
    assert torch.equal(first, want), (first, want)
    assert torch.equal(again, want), (again, want)
    assert torch_tpu.metrics()["cache_misses"] == misses, "a repeated generate built new programs"
    assert dict(torch_tpu.metrics()["fallback_ops"]) == {}


def test_hf_llama_compiled_trains_like_cpu():
    """torch.compile(model) with the default backend (tpu graphs go to the "tpu" backend): Llama's causal mask is
    built with F.pad, whose reference decomposition AOTAutograd refused before constant_pad_nd was lowered whole."""
    torch.manual_seed(0)
    model = _llama()
    ids = _tokens(2, 12, seed=1)
    batch = {"ids": ids, "mask": torch.ones_like(ids)}
    compiled_on_tpu = {}

    def loss_fn(m, d):
        if d["ids"].device.type == "tpu":
            if id(m) not in compiled_on_tpu:
                compiled_on_tpu[id(m)] = torch.compile(m)
            m = compiled_on_tpu[id(m)]
        return m(input_ids=d["ids"], attention_mask=d["mask"], labels=d["ids"]).loss

    before = torch_tpu.metrics()["compiled_graphs"]
    try:
        fallbacks = _compare(model, batch, loss_fn, _adamw)
    finally:
        torch._dynamo.reset()
    assert fallbacks == {}, fallbacks
    assert torch_tpu.metrics()["compiled_graphs"] > before
