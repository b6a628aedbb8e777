"""The architecture sweep's own machinery (python -m tools.model_sweep), without running a model: tiny configs,
tie breaking of constant weights, the training step's calling convention, the report. The fixed sample of model
types that runs end to end is tests/sweep/test_sample.py (`make test-sweep`, its own CI step)."""

from __future__ import annotations

import copy
import re

import pytest
import torch

pytest.importorskip("transformers")

from tools.model_sweep.tinyconfig import tiny_config  # noqa: E402


def test_tiny_configs_turn_every_dropout_off():
    # A dropout left on makes the CPU and tpu training steps draw different masks: a false mismatch (GPT-2's
    # resid_pdrop/embd_pdrop/attn_pdrop once passed for a wrong gradient).
    # CvT's per-stage lists (drop_rate, attention_drop_rate, drop_path_rate = [0, 0, 0.1]) once left stochastic depth
    # on in its last stage: a training "mismatch" of every gradient there. EfficientNet's drop_connect_rate did the
    # same to its blocks.
    for model_type in ("gpt2", "bert", "bart", "vit", "cvt", "efficientnet"):
        config = tiny_config(model_type).to_dict()
        probs = {
            k: v
            for k, v in config.items()
            if ("drop" in k or k.endswith("_prob"))
            and (isinstance(v, float) or (isinstance(v, list) and v and isinstance(v[0], float)))
        }
        flat = [x for v in probs.values() for x in (v if isinstance(v, list) else [v])]
        assert probs and all(x == 0.0 for x in flat), (model_type, probs)


def test_constant_weights_get_seeded_noise():
    # afmoe's router starts at zero: every expert scores 0.5 and topk's pick among ties is unspecified (CPU and tpu
    # differ), which once showed as a mismatch of the whole model. The sweep breaks such ties the same way each run.
    import torch

    from tools.model_sweep.worker import _break_constant_weights

    def build() -> torch.nn.Module:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
        torch.nn.init.zeros_(model[0].weight)
        _break_constant_weights(model)
        return model

    a, b = build(), build()
    for name, p in a.named_parameters():
        assert p.unique().numel() == p.numel(), name  # no ties left
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert a[0].weight.abs().max() < 0.1  # small: the model stays what its init meant


class _Regression(torch.nn.Module):
    """The calling convention the sweep's training step uses (inputs as keywords, `labels`, a dict with "loss")."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.mse_loss(self.linear(x).squeeze(-1), labels)}


def test_float64_arbiter_passes_rounding_and_keeps_real_differences() -> None:
    from tools.model_sweep.worker import _float64_arbiter, _train, doubled

    torch.manual_seed(0)
    model = _Regression()
    inputs, labels = {"x": torch.randn(8, 4)}, torch.randn(8)
    cpu = _train(copy.deepcopy(model), inputs, labels, "cpu")
    close = {k: v * (1 + 1e-6) for k, v in cpu.items()}  # float32 rounding: within the bound
    wrong = dict(cpu, **{"grad.linear.weight": cpu["grad.linear.weight"] * 1.01})  # a wrong gradient
    notes: list[str] = []
    run64 = lambda: _train(copy.deepcopy(model).double(), doubled(inputs), doubled(labels), "cpu")  # noqa: E731
    assert _float64_arbiter(run64, cpu, close, notes) == {"result": "pass"}
    assert _float64_arbiter(run64, cpu, wrong, notes) == {}
    assert "grad.linear.weight" in notes[-1] and "train vs float64" in notes[-1]
    # CPU's own spread: a reordered CPU run (another summation order) as far from float64 as tpu lets tpu pass;
    # one as close as the first does not
    spread = dict(cpu, **{"grad.linear.weight": cpu["grad.linear.weight"] * 1.012})
    assert _float64_arbiter(run64, cpu, wrong, notes, reordered=lambda: spread) == {"result": "pass"}
    assert "either order" in notes[-1]
    assert _float64_arbiter(run64, cpu, wrong, notes, reordered=lambda: cpu) == {}


def test_a_head_without_a_loss_trains_on_its_first_output() -> None:
    from tools.model_sweep.worker import _loss

    logits = torch.tensor([[1.0, 3.0]])
    assert torch.equal(_loss({"logits": logits, "hidden": logits * 2}), logits.mean())
    assert torch.equal(_loss({"loss": torch.tensor(5.0), "logits": logits}), torch.tensor(5.0))
    assert torch.equal(_loss((torch.tensor(2.0), logits)), torch.tensor(2.0))


def test_tiny_hybrids_keep_one_layer_of_every_kind():
    # Keeping the first two layers of a hybrid (qwen3_next: three linear-attention layers, then one full attention)
    # once built models with no attention layer at all, which transformers' mask code rejects; gemma3's five sliding
    # layers per global one lost the global layer. The tiny model keeps the first layer of each kind, in order, and
    # dicts keyed by layer index (gemma4's per_layer_config) are renumbered to the kept layers.
    from tools.model_sweep.tinyconfig import shrink

    hybrid = shrink({"num_hidden_layers": 8, "layer_types": ["linear", "linear", "linear", "full"] * 2})
    assert hybrid["num_hidden_layers"] == 2 and hybrid["layer_types"] == ["linear", "full"]
    three = shrink({"num_hidden_layers": 6, "layer_types": ["a", "b", "c"] * 2, "mlp_types": ["d"] * 6})
    assert three["num_hidden_layers"] == 3 and three["layer_types"] == ["a", "b", "c"]
    plain = shrink({"num_hidden_layers": 12, "layer_types": ["full"] * 12, "id2label": {0: "A", 1: "B", 5: "C"}})
    assert plain["layer_types"] == ["full", "full"] and plain["id2label"] == {0: "A", 1: "B", 5: "C"}
    per_layer = shrink(
        {"num_hidden_layers": 12, "layer_types": ["s"] * 5 + ["f"] + ["s"] * 6, "per_layer_config": {5: "x"}}
    )
    assert per_layer["layer_types"] == ["s", "f"] and per_layer["per_layer_config"] == {1: "x"}
    # The multimodal rotary sections follow the tiny head (glm4v's [8, 12, 12] is for a 64-wide head).
    text = tiny_config("glm4v").text_config
    assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2


def test_inputs_take_the_layout_the_model_runs_on_the_cpu():
    # Whisper reads audio features as (batch, mel, frames), Parakeet as (batch, frames, mel); DAC's waveform has a
    # channel dimension, wav2vec2's has none. Each once failed on the CPU too ("error (CPU too)"), so tpu went untested.
    import transformers

    from tools.model_sweep.heads import input_candidates
    from tools.model_sweep.worker import _prepare_config, _runnable_inputs

    shapes = {}
    # VideoMAE reads a clip (batch, frames, channels, height, width).
    for model_type, cls in [
        ("whisper", "WhisperModel"),
        ("parakeet_ctc", "ParakeetForCTC"),
        ("dac", "DacModel"),
        ("videomae", "VideoMAEModel"),
        ("granite_speech5_encoder", "GraniteSpeech5Encoder"),  # four mel frames stacked per row
    ]:
        torch.manual_seed(0)
        model = getattr(transformers, cls)(_prepare_config(model_type, "base"))
        inputs = _runnable_inputs(model, input_candidates(model, "base"))
        main = next(k for k in ("input_features", "input_values", "pixel_values") if k in inputs)
        shapes[model_type] = tuple(inputs[main].shape)
    assert shapes == {
        "whisper": (2, 16, 32),
        "parakeet_ctc": (2, 32, 16),
        "dac": (2, 1, 1600),
        "videomae": (2, 16, 3, 32, 32),
        "granite_speech5_encoder": (2, 16, 64),
    }


def test_types_the_auto_mappings_leave_out_run_their_own_model_class():
    from tools.model_sweep.heads import heads_for, own_model_class

    # sub-model configurations: the class named after the config, exported by transformers
    assert heads_for("blip_vision_model") == [("base", "BlipVisionModel")]
    assert heads_for("clap_text_model") == [("base", "ClapTextModel")]
    # otherwise the config's own class, whatever its name ends in
    assert own_model_class("depth_anything") == "DepthAnythingForDepthEstimation"
    # a type the mappings name keeps its mapped heads
    assert heads_for("bert")[0] == ("base", "BertModel")
    # no modeling class claims this config
    assert own_model_class("sam_prompt_encoder") is None


def test_encoder_decoder_classification_reads_each_rows_last_eos():
    # T5/MVP/PLBart classification heads pool the decoder state at each row's eos and build the decoder's inputs
    # from input_ids; separate (shorter) decoder_input_ids made the CPU forward fail, so tpu went untested.
    import transformers

    from tools.model_sweep.heads import make_inputs
    from tools.model_sweep.worker import _forward, _prepare_config

    torch.manual_seed(0)
    model = transformers.T5ForSequenceClassification(_prepare_config("t5", "classification"))
    inputs = make_inputs(model, "classification")
    assert "decoder_input_ids" not in inputs
    assert bool((inputs["input_ids"][:, -1] == model.config.eos_token_id).all())
    assert _forward(model, inputs, "cpu")  # runs on the CPU


def test_classification_heads_reload_from_their_own_checkpoint(tmp_path):
    # BART's config reloads its class default of 3 labels: a head resized to 2 failed to load what it saved.
    import transformers

    from tools.model_sweep.worker import _prepare_config

    cfg = _prepare_config("bart", "classification")
    assert cfg.num_labels == 3
    transformers.BartForSequenceClassification(cfg).save_pretrained(tmp_path)
    transformers.BartForSequenceClassification.from_pretrained(tmp_path)
    assert _prepare_config("bert", "classification").num_labels == 2


def test_sub_models_get_the_inputs_their_parent_would_pass():
    # Qwen-VL-style vision towers take flattened patches and a (t, h, w) grid, encoders and backbones a bare
    # `hidden_states`; the main-input heuristics made neither, so these types failed on the CPU too.
    import transformers

    from tools.model_sweep.heads import input_candidates
    from tools.model_sweep.worker import _forward, _prepare_config, _runnable_inputs

    shapes = {}
    for model_type, cls in [
        ("qwen2_5_vl_vision", "Qwen2_5_VisionTransformerPretrainedModel"),  # hidden_states + grid_thw
        ("video_llama_3_vision", "VideoLlama3VisionModel"),  # pixel_values + grid_thw + merge_sizes
        ("granite_speech_encoder", "GraniteSpeechCTCEncoder"),  # hidden_states: feature frames
    ]:
        torch.manual_seed(0)
        model = getattr(transformers, cls)(_prepare_config(model_type, "base"))
        inputs = _runnable_inputs(model, input_candidates(model, "base"))
        assert _forward(model, inputs, "cpu")
        shapes[model_type] = {k: tuple(v.shape) for k, v in inputs.items()}
    assert shapes == {
        # two images of 4x4 patches (two 2x2 merge windows a side), 3 channels x 2 frames x 8x8 pixels each
        "qwen2_5_vl_vision": {"hidden_states": (32, 384), "grid_thw": (2, 3)},
        "video_llama_3_vision": {"pixel_values": (8, 192), "grid_thw": (2, 3), "merge_sizes": (2,)},
        "granite_speech_encoder": {"hidden_states": (2, 32, 32)},
    }


def test_tiny_configs_of_validated_architectures_build():
    # Configs whose validators tie fields together (layer counts that must add up, token ranges inside the
    # vocabulary, detector channels that follow the backbone's stages) failed to build from the generic shrink.
    import transformers

    from tools.model_sweep.heads import input_candidates
    from tools.model_sweep.worker import _forward, _prepare_config

    for model_type, cls in [
        ("dory", "DoryModel"),
        ("apertus1p5", "Apertus1p5Model"),
        ("kolibri1_1", "Kolibri1_1Model"),
        ("cohere_compass_text", "CohereCompassTextModel"),
        ("d_fine", "DFineModel"),
        ("rt_detr_v2", "RTDetrV2Model"),
    ]:
        torch.manual_seed(0)
        model = getattr(transformers, cls)(_prepare_config(model_type, "base"))
        assert _forward(model, input_candidates(model, "base")[0], "cpu"), model_type


def test_composite_types_build_their_lm_head_from_the_sub_config_it_declares():
    # Llama4ForCausalLM is built from Llama4TextConfig (its checkpoints store that), MusicgenForCausalLM from the
    # decoder's config; handing them the composite config failed on the CPU too ("no attribute pad_token_id").
    import transformers

    from tools.model_sweep.heads import input_candidates, make_labels
    from tools.model_sweep.worker import _prepare_config, _runnable_inputs

    cfg = _prepare_config("llama4", "causal_lm", transformers.Llama4ForCausalLM)
    assert type(cfg).__name__ == "Llama4TextConfig"
    assert type(_prepare_config("llama4", "base")).__name__ == "Llama4Config"
    # MusicGen's decoder reads one row of ids per codebook and labels as (batch, positions, codebooks)
    torch.manual_seed(0)
    model = transformers.MusicgenForCausalLM(_prepare_config("musicgen", "causal_lm", transformers.MusicgenForCausalLM))
    inputs = _runnable_inputs(model, input_candidates(model, "causal_lm"))
    assert tuple(inputs["input_ids"].shape) == (2 * model.config.num_codebooks, 8)
    labels = make_labels(model, "causal_lm", inputs)
    assert tuple(labels.shape) == (2, 8, model.config.num_codebooks)
    assert model(**inputs, labels=labels).loss is not None


def test_diffusers_shrink_rescales_rotary_axes_to_the_head_width():
    from tools.model_sweep.diffusers_source import HEAD_DIM, _rescale_axes, _shrink

    for axes in ([16, 56, 56], (32, 32, 32, 32), [4, 2, 2]):
        out = _rescale_axes(axes, HEAD_DIM)
        assert sum(out) == HEAD_DIM and all(a % 2 == 0 and a > 0 for a in out), (axes, out)
    assert _shrink("axes_dims_rope", (16, 56, 56)) == (2, 8, 6)
    assert _shrink("num_attention_heads", (5, 10, 20, 20)) == (2, 2, 2, 2)
    assert _shrink("block_out_channels", (320, 640, 1280, 1280)) == (32, 32, 32, 32)
    assert _shrink("in_channels", 192) == 192  # an input's width is the input's, not a size to shrink
    assert _shrink("joint_attention_dim", 4096) == 32
    assert _shrink("dropout", 0.1) == 0.0


def test_diffusers_position_ids_have_one_column_per_rotary_axis():
    from tools.model_sweep.diffusers_source import _id_axes, _ids

    assert _ids(8).shape == (8, 3) and _ids(8, _id_axes({"axes_dims_rope": [4, 4, 4, 4]})).shape == (8, 4)
    assert _ids(8)[5].tolist() == [0.0, 1.0, 1.0]  # token 5 of a grid four wide: row 1, column 1


def test_diffusers_inputs_and_configs_of_krea2_vace_rae_and_projections():
    # Each failed on the CPU too before: Krea 2 (text heads the shrink missed, position ids, every text layer),
    # VACE (its blocks past the two layers, a control video), the RAE autoencoder (a DINOv2 encoder of zero heads,
    # patches not tiling the image), image projections taking a vector as wide as the model.
    pytest.importorskip("diffusers")
    from tools.model_sweep.diffusers_source import build, input_candidates
    from tools.model_sweep.diffusers_worker import _forward, _runnable

    shapes = {}
    for name in ("Krea2Transformer2DModel", "WanVACETransformer3DModel", "AutoencoderRAE", "CLIPImageProjection"):
        model = build(name)
        inputs = _runnable(model, input_candidates(model))
        assert _forward(model, inputs, "cpu"), name
        shapes[name] = {k: tuple(v.shape) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    assert shapes["Krea2Transformer2DModel"]["encoder_hidden_states"] == (2, 8, 2, 32)
    assert shapes["Krea2Transformer2DModel"]["position_ids"] == (8 + 64, 3)
    assert shapes["WanVACETransformer3DModel"]["control_hidden_states"][1:] == (32, 3, 16, 16)
    assert shapes["AutoencoderRAE"] == {"sample": (2, 3, 64, 64)}
    assert shapes["CLIPImageProjection"] == {"x": (2, 32)}


def test_inputs_by_name_videos_series_boxes_and_the_other_half_of_a_pair():
    # Each of these failed on the CPU too (or was skipped: "no inputs for main input") before the sweep made the
    # input by name: a video clip, a time series context (and TimesFM's padding mask and frequency), LayoutLM's word
    # boxes, ViLT's image beside its text, VideoPrism's text beside its clip.
    import transformers

    from tools.model_sweep.heads import input_candidates
    from tools.model_sweep.worker import _forward, _prepare_config, _runnable_inputs

    shapes = {}
    for model_type, cls in [
        ("vjepa2", "VJEPA2Model"),
        ("patchtst", "PatchTSTModel"),
        ("timesfm", "TimesFmModel"),
        ("layoutlm", "LayoutLMModel"),
        ("vilt", "ViltModel"),
        ("videoprism", "VideoPrismClipModel"),
        ("informer", "InformerModel"),  # context plus its largest lag, time features, observed mask
    ]:
        torch.manual_seed(0)
        model = getattr(transformers, cls)(_prepare_config(model_type, "base"))
        inputs = _runnable_inputs(model, input_candidates(model, "base"))
        assert _forward(model, inputs, "cpu")
        shapes[model_type] = {k: tuple(v.shape) for k, v in inputs.items() if k != "attention_mask"}
    assert shapes == {
        "vjepa2": {"pixel_values_videos": (2, 16, 3, 32, 32)},
        "patchtst": {"past_values": (2, 32, 1)},
        "timesfm": {"past_values": (2, 128), "past_values_padding": (2, 128), "freq": (2, 1)},
        "layoutlm": {"input_ids": (2, 8), "bbox": (2, 8, 4)},
        "vilt": {"input_ids": (2, 8), "pixel_values": (2, 3, 32, 32)},
        "videoprism": {"pixel_values_videos": (2, 16, 3, 32, 32), "input_ids": (2, 8)},
        "informer": {"past_values": (2, 11), "past_time_features": (2, 11, 0), "past_observed_mask": (2, 11)},
    }


def test_detr_family_builds_on_transformers_own_resnet():
    # Their default backbone is timm's, which cannot be imported here: every DETR-family type failed on the CPU too.
    import transformers

    from tools.model_sweep.worker import _prepare_config

    for model_type, cls in [("detr", "DetrModel"), ("deformable_detr", "DeformableDetrModel")]:
        model = getattr(transformers, cls)(_prepare_config(model_type, "base"))
        assert model.config.backbone_config.model_type == "resnet"


def test_placeholder_prompts_patch_sequences_and_per_type_shapes():
    # Each of these failed on the CPU too before: BLIP-2/InstructBLIP/Kosmos-2 need image placeholders in the prompt,
    # SigLIP 2 its patch sequence, IDEFICS a list of images, SpeechT5's base model embedded frames, X-CLIP's tower
    # every frame as a row, LXMERT region features, keypoint matchers a pair of images, audio encoders a second of
    # sound, and the rest a tiny configuration their modeling code accepts.
    import transformers

    from tools.model_sweep.heads import input_candidates
    from tools.model_sweep.worker import _forward, _prepare_config, _runnable_inputs

    shapes = {}
    for model_type, cls in [
        ("blip-2", "Blip2Model"),
        ("instructblip", "InstructBlipModel"),
        ("kosmos-2", "Kosmos2Model"),
        ("siglip2_vision_model", "Siglip2VisionModel"),
        ("idefics", "IdeficsModel"),
        ("speecht5", "SpeechT5Model"),
        ("swin", "SwinModel"),
        ("sam", "SamModel"),
        ("zamba2", "Zamba2Model"),
        ("mamba2", "Mamba2Model"),
        ("lilt", "LiltModel"),
        ("bros", "BrosModel"),
        ("dia", "DiaModel"),
        ("superpoint", "SuperPointForKeypointDetection"),
        ("xclip_vision_model", "XCLIPVisionModel"),
        ("sam2", "Sam2Model"),
        ("dots1", "Dots1Model"),
        ("textnet", "TextNetModel"),
        ("grounding-dino", "GroundingDinoModel"),
        ("lxmert", "LxmertModel"),
        ("hunyuan_vl_text", "HunYuanVLTextModel"),
        ("inkling2_text", "Inkling2TextModel"),
        ("superglue", "SuperGlueForKeypointMatching"),
        ("pe_audio_encoder", "PeAudioEncoder"),
        ("neomme", "NeoMMEModel"),
        ("qwen2_5_omni_thinker", "Qwen2_5OmniThinkerModel"),
    ]:
        torch.manual_seed(0)
        model = getattr(transformers, cls)(_prepare_config(model_type, "base"))
        inputs = _runnable_inputs(model, input_candidates(model, "base"))
        assert _forward(model, inputs, "cpu"), model_type
        shapes[model_type] = {k: tuple(v.shape) for k, v in inputs.items() if k != "attention_mask"}
    queries = transformers.Blip2Config().num_query_tokens
    assert shapes["blip-2"] == {"pixel_values": (2, 3, 32, 32), "input_ids": (2, queries + 8)}
    assert shapes["instructblip"]["qformer_input_ids"] == (2, 8)
    assert shapes["kosmos-2"]["image_embeds_position_mask"] == shapes["kosmos-2"]["input_ids"]
    assert shapes["siglip2_vision_model"]["spatial_shapes"] == (2, 2)
    assert len(shapes["idefics"]["pixel_values"]) == 5 and "image_attention_mask" in shapes["idefics"]
    assert shapes["speecht5"]["decoder_input_values"][-1] == shapes["speecht5"]["input_values"][-1]
    assert shapes["xclip_vision_model"]["pixel_values"][0] == 2 * transformers.XCLIPVisionConfig().num_frames
    assert shapes["lxmert"]["visual_feats"][:2] == shapes["lxmert"]["visual_pos"][:2] == (2, 4)
    assert shapes["superglue"]["pixel_values"][:2] == (2, 2)  # a pair of images per sample
    assert shapes["pe_audio_encoder"]["input_values"] == (2, 1, 16000)  # one second, mono


def test_hybrids_with_an_attention_layer_generate():
    # Bamba, GraniteMoeHybrid and Zamba were all Mamba at their class defaults: generate() sizes its mask from an
    # attention layer of the cache and failed on the CPU too.
    import transformers

    from tools.model_sweep.heads import input_candidates
    from tools.model_sweep.worker import _generate, _prepare_config, _runnable_inputs

    for model_type, cls in [("bamba", "BambaForCausalLM"), ("zamba", "ZambaForCausalLM")]:
        torch.manual_seed(0)
        model = getattr(transformers, cls)(_prepare_config(model_type, "causal_lm"))
        inputs = _runnable_inputs(model, input_candidates(model, "causal_lm"))
        assert _generate(model, inputs, "cpu")["tokens"].shape == (2, 8 + 4)


def test_models_without_forward_or_with_missing_libraries_are_skipped_with_the_reason():
    from tools.model_sweep.worker import run_head

    bark = run_head("bark", "base", "BarkModel")
    assert bark["result"] == "skipped" and "no forward()" in bark["reason"]
    timm = run_head("timm_wrapper", "base", "TimmWrapperModel")
    # every library the class names is listed (PIL too, where Pillow is not installed)
    assert timm["result"] == "skipped" and re.fullmatch(
        r"needs (\S+ and )*timm( and \S+)*, not installed here", timm["reason"]
    )


def test_when_no_input_layout_runs_the_report_names_the_telling_error():
    # CosmosTransformer3D rejected the image layout ("not enough values to unpack") and every video layout with
    # "name 'transforms' is not defined" (it needs torchvision): the report said the former.
    from tools.model_sweep.worker import runnable

    def run(inputs):
        raise {
            "image": ValueError("not enough values to unpack (expected 5, got 4)"),
            "video": NameError("transforms"),
        }[inputs]

    assert runnable(run, ["image", "video", "image"]) == "video"
    assert runnable(lambda inputs: None, ["image", "video"]) == "image"
    assert runnable(lambda inputs: run("image"), ["a", "b"]) == "a"  # all layout rejections: the first
