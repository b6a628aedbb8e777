"""Tiny random decoder models with a tokenizer, saved the way vLLM loads a model directory, built offline.

The weights come from one seed with a wide initialiser, so that the next-token distributions are peaked and greedy
decoding does not sit on near-ties that the last bit of a float would decide.
"""

from __future__ import annotations

from pathlib import Path

from tests.ecosystem.titan.assets import BOS, EOS, _documents, train_tokenizer

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _tokenizer(out: Path) -> int:
    from transformers import PreTrainedTokenizerFast

    tokenizer = train_tokenizer(_documents(300, seed=1), vocab_size=512)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, model_max_length=512)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast.vocab_size


def build(out: Path, family: str = "llama") -> Path:
    """Writes a tiny random `family` ("llama" or "qwen2") model with its tokenizer to `out` (idempotent)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    if (out / "config.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    vocab = _tokenizer(out)
    sizes = dict(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.25,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=family == "qwen2",
    )
    config = LlamaConfig(**sizes) if family == "llama" else Qwen2Config(**sizes)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    return out
