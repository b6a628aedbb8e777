"""A fixed sample of the diffusers source of the architecture sweep (python -m tools.model_sweep --source diffusers)
passes: tiny random diffusers models, saved and loaded with device_map="tpu", match the CPU in a forward pass, one
AdamW training step and the forward compiled with backend="tpu", with no CPU fallback; the two tiny pipelines match
the CPU image for image. Its own CI step (`make test-sweep`, which installs requirements-sweep.txt).

The sample: a text-conditioned UNet, an MMDiT transformer (SD3), a Flux transformer (packed latent tokens with
rotary position ids), a KL autoencoder and a UNet ControlNet, then DDPM over a UNet and class-conditioned DiT with a
KL autoencoder and classifier-free guidance.
"""

from __future__ import annotations

import pytest

pytest.importorskip("diffusers")

from tools.model_sweep.cli import run_type  # noqa: E402
from tools.model_sweep.report import detail  # noqa: E402

MODELS = ["UNet2DConditionModel", "SD3Transformer2DModel", "FluxTransformer2DModel", "AutoencoderKL", "ControlNetModel"]
PIPELINES = ["pipeline:DDPMPipeline", "pipeline:DiTPipeline"]


@pytest.mark.parametrize("name", MODELS + PIPELINES)
def test_diffusers_sweep_sample_passes(name):
    entry = run_type(name, None, timeout=240.0, source="diffusers")
    rec = entry["heads"]["base"]
    assert rec["result"] == "pass", f"{name}: {rec['result']}: {detail(rec, limit=400)}"
    if name in MODELS:
        assert rec.get("loaded_with") == "device_map", rec.get("notes")
        assert {"forward", "train", "compile"} <= set(rec["steps"]), rec["steps"]
    else:
        assert rec["steps"]["pipeline"]["result"] == "pass"
