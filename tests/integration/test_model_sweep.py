"""A fixed sample of the architecture sweep (python -m tools.model_sweep) passes: tiny random transformers models,
saved and loaded with device_map="tpu", match the CPU in a forward pass, greedy generation and one AdamW training
step, with no CPU fallback.

The sample covers a decoder LM with tied input/output embeddings (gpt2), one without (llama), an encoder (bert), an
encoder-decoder (t5), a vision model (vit), an audio model (wav2vec2) and a mixture of experts (mixtral); one head
each keeps the file within a few minutes on two cores. Each type runs in the sweep's own worker process.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from tools.model_sweep.cli import run_type  # noqa: E402  (needs transformers)
from tools.model_sweep.report import detail  # noqa: E402

SAMPLE = {
    "gpt2": "causal_lm",
    "llama": "causal_lm",
    "bert": "masked_lm",
    "t5": "seq2seq_lm",
    "vit": "classification",
    "wav2vec2": "classification",
    "mixtral": "causal_lm",
}


@pytest.mark.parametrize("model_type", list(SAMPLE))
def test_model_sweep_sample_passes(model_type):
    head = SAMPLE[model_type]
    entry = run_type(model_type, head, timeout=150.0)
    rec = entry["heads"][head]
    assert rec["result"] == "pass", f"{model_type}/{head}: {rec['result']}: {detail(rec, limit=400)}"
    assert rec.get("loaded_with") == "device_map", rec.get("notes")
    assert "train" in rec["steps"], "the head has a loss: the training step must have run"
    if head in ("causal_lm", "seq2seq_lm"):
        assert rec["steps"].get("generate", {}).get("result") == "pass"
