"""A fixed sample of the architecture sweep (python -m tools.model_sweep) passes: tiny random transformers models,
saved and loaded with device_map="tpu", match the CPU in a forward pass, greedy generation and one AdamW training
step, with no CPU fallback. Its own CI step (`make test-sweep`): each type runs in the sweep's worker process and
compiles full models, minutes on two cores.

The sample covers a decoder LM with tied input/output embeddings (gemma), one without (llama), an encoder (bert), an
encoder-decoder (bart), a vision model (vit), an audio model (whisper), a mixture of experts (mixtral) and a hybrid of
linear and full attention layers (qwen3_next); one head each. KNOWN holds sweep findings not fixed yet (strict
xfails: a fix makes them fail until they move into SAMPLE).
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from tools.model_sweep.cli import run_type  # noqa: E402  (needs transformers)
from tools.model_sweep.report import detail  # noqa: E402

SAMPLE = {
    "gemma": "causal_lm",
    "llama": "causal_lm",
    "bert": "masked_lm",
    "bart": "seq2seq_lm",
    "vit": "classification",
    "whisper": "seq2seq_lm",
    "mixtral": "causal_lm",
    "qwen3_next": "causal_lm",
}
KNOWN: dict[str, tuple[str, str]] = {}  # model type -> (head, why): none open
CASES = [pytest.param(t, h, id=t) for t, h in SAMPLE.items()] + [
    pytest.param(t, h, id=t, marks=pytest.mark.xfail(reason=why, strict=True)) for t, (h, why) in KNOWN.items()
]


@pytest.mark.parametrize(("model_type", "head"), CASES)
def test_model_sweep_sample_passes(model_type, head):
    entry = run_type(model_type, head, timeout=150.0)
    rec = entry["heads"][head]
    assert rec["result"] == "pass", f"{model_type}/{head}: {rec['result']}: {detail(rec, limit=400)}"
    assert rec.get("loaded_with") == "device_map", rec.get("notes")
    assert "train" in rec["steps"], "the head has a loss: the training step must have run"
    if head in ("causal_lm", "seq2seq_lm"):
        assert rec["steps"].get("generate", {}).get("result") == "pass"
