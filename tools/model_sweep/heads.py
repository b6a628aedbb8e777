"""Which head classes of a model type the sweep runs, and their inputs, labels and generation arguments."""

from __future__ import annotations

import inspect
from typing import Any

import torch

BATCH = 2
SEQ = 8
DECODER_SEQ = 5
AUDIO_SAMPLES = 1600
GENERATE_TOKENS = 4

# (head, auto mapping names) in the order the sweep runs them; the first mapping of a head that names the type wins.
HEAD_MAPPINGS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("MODEL_MAPPING_NAMES",)),
    ("causal_lm", ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",)),
    ("seq2seq_lm", ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES")),
    ("image_text_to_text", ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",)),
    ("masked_lm", ("MODEL_FOR_MASKED_LM_MAPPING_NAMES",)),
    (
        "classification",
        (
            "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
            "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
            "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
        ),
    ),
]
GENERATIVE = {"causal_lm", "seq2seq_lm", "image_text_to_text"}
WITH_LOSS = {"causal_lm", "seq2seq_lm", "image_text_to_text", "masked_lm", "classification"}


def heads_for(model_type: str) -> list[tuple[str, str]]:
    """(head, class name) pairs of one model type; a class serving two heads runs once, under the first."""
    from transformers.models.auto import modeling_auto

    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for head, mappings in HEAD_MAPPINGS:
        for mapping in mappings:
            names = getattr(modeling_auto, mapping).get(model_type)
            if names is None:
                continue
            name = names[0] if isinstance(names, (tuple, list)) else names
            if name not in seen:
                seen.add(name)
                out.append((head, name))
            break
    if not out:
        own = own_model_class(model_type)
        if own is not None:
            out.append(("base", own))
    return out


def own_model_class(model_type: str) -> str | None:
    """The model class of a type the auto mappings leave out (a sub-model's configuration: a vision tower, a text
    encoder, a Q-Former): the exported class of the config's own modeling module whose `config_class` is that
    config. The one named like the config (`FooVisionConfig` -> `FooVisionModel`) wins, then one ending in
    "Model", then the first by name."""
    import importlib

    import transformers
    from transformers import PreTrainedModel
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    config_name = CONFIG_MAPPING_NAMES.get(model_type)
    config_cls = getattr(transformers, config_name, None) if config_name else None
    if config_cls is None or not config_cls.__module__.startswith("transformers.models."):
        return None
    package, _, leaf = config_cls.__module__.rpartition(".")
    try:
        module = importlib.import_module(f"{package}.{leaf.replace('configuration_', 'modeling_', 1)}")
    except Exception:  # noqa: BLE001 - a modeling module that needs a missing library: nothing to run
        return None
    found = sorted(
        name
        for name, cls in vars(module).items()
        if isinstance(cls, type)
        and issubclass(cls, PreTrainedModel)
        and cls.__dict__.get("config_class", None) is config_cls
        and not name.lower().endswith("pretrainedmodel")
        and getattr(transformers, name, None) is cls
    )
    if not found:
        return None
    named = config_name.removesuffix("Config") + "Model"
    return next((n for n in found if n == named), next((n for n in found if n.endswith("Model")), found[0]))


def _sub(cfg: Any, *names: str) -> Any:
    for n in names:
        sub = getattr(cfg, n, None)
        if sub is not None and not isinstance(sub, (int, float, str, bool, list, dict)):
            return sub
    return cfg


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def special_ids(cfg: Any) -> set[int]:
    """Every token id the configuration (and its sub-configurations) names."""
    ids: set[int] = set()
    for key, value in cfg.to_dict().items():
        if key.endswith(("_token_id", "_token_index")) and isinstance(value, int):
            ids.add(value)
        if isinstance(value, dict):
            ids |= {
                v for k, v in value.items() if str(k).endswith(("_token_id", "_token_index")) and isinstance(v, int)
            }
    return ids


def token_ids(cfg: Any, shape: tuple[int, int], seed: int) -> torch.Tensor:
    """Random ids of ordinary tokens: none of the special ids the configuration names."""
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    vocab = int(getattr(text, "vocab_size", None) or 100)
    ordinary = [i for i in range(min(vocab, 100)) if i not in special_ids(cfg)][3:]
    idx = torch.randint(0, len(ordinary), shape, generator=_gen(seed))
    return torch.tensor(ordinary)[idx]


def _pixels(cfg: Any) -> torch.Tensor:
    vis = _sub(cfg, "vision_config", "backbone_config")
    size = getattr(vis, "image_size", 32)
    h, w = (size, size) if isinstance(size, int) else tuple(size)[:2]
    channels = getattr(vis, "num_channels", 3)
    return torch.randn(BATCH, channels, h, w, generator=_gen(2))


def _video(cfg: Any) -> torch.Tensor:
    """A clip (batch, frames, channels, height, width): the configured frame count (at most 16; at least two
    tubelets where frames are grouped in time)."""
    vis = _sub(cfg, "vision_config")
    frames = getattr(vis, "num_frames", None) or getattr(vis, "frames_per_clip", None) or 4
    tubelet = getattr(vis, "tubelet_size", 1)
    tubelet = tubelet[0] if isinstance(tubelet, (tuple, list)) else tubelet
    frames = max(min(int(frames), 16), 2 * int(tubelet or 1))
    image = _pixels(cfg)
    return torch.randn(image.shape[0], frames, *image.shape[1:], generator=_gen(2))


def _series(cfg: Any) -> torch.Tensor:
    """A time series context: (batch, context, channels) for multivariate models, else (batch, context); at most
    four patches of a long-context model (over 256 steps); a forecaster with lagged inputs also sees its largest
    lag before the context."""
    context = int(getattr(cfg, "context_length", 32))
    lags = getattr(cfg, "lags_sequence", None)
    if lags:
        context += max(lags)
    patch = getattr(cfg, "patch_length", None)
    if isinstance(patch, int) and context > 256:
        context = 4 * patch
    channels = getattr(cfg, "num_input_channels", None)
    shape = (BATCH, context, channels) if isinstance(channels, int) else (BATCH, context)
    return torch.randn(*shape, generator=_gen(2))


def _features(cfg: Any) -> torch.Tensor:
    audio = _sub(cfg, "audio_config", "encoder_config")
    mel = getattr(audio, "num_mel_bins", None)
    if mel is not None:  # whisper-like: (batch, mel bins, 2 * encoder positions)
        frames = 2 * int(getattr(audio, "max_source_positions", 16))
        return torch.randn(BATCH, mel, frames, generator=_gen(2))
    per_channel = int(getattr(audio, "input_feat_per_channel", 16)) * int(getattr(audio, "input_channels", 1))
    return torch.randn(BATCH, 4 * SEQ, per_channel, generator=_gen(2))


def _contrastive(cfg: Any) -> bool:
    """A text and an image tower side by side (CLIP, ALIGN, BLIP, ...): a vision config, and no image token ids that
    would ask the prompt to hold placeholders for image features (LLaVA-style models)."""
    if getattr(cfg, "vision_config", None) is None:
        return False
    keys = set(cfg.to_dict())
    return not any(k in keys for k in ("image_token_id", "image_token_index", "image_token", "boi_token_id"))


def forward_params(model: torch.nn.Module) -> set[str]:
    return set(inspect.signature(model.forward).parameters)


def make_inputs(model: Any, head: str) -> dict[str, torch.Tensor]:
    """Inputs of one forward call, made from the model's main input name and configuration (CPU tensors)."""
    cfg = model.config
    accepts = forward_params(model)
    main = model.main_input_name
    inputs: dict[str, torch.Tensor] = {}
    if main == "input_ids":
        inputs["input_ids"] = token_ids(cfg, (BATCH, SEQ), seed=1)
        if "attention_mask" in accepts:
            inputs["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    elif main == "pixel_values":
        inputs["pixel_values"] = _pixels(cfg)
    elif main == "input_features":
        inputs["input_features"] = _features(cfg)
    elif main == "input_values":
        inputs["input_values"] = torch.randn(BATCH, AUDIO_SAMPLES, generator=_gen(2))
    elif main == "pixel_values_videos":
        inputs[main] = _video(cfg)
    elif main == "past_values":
        inputs[main] = _series(cfg)
    else:
        raise NotImplementedError(f"main input {main!r}")
    if main == "input_ids" and "bbox" in accepts:  # layout models (BROS, UDOP) embed each token's word box
        from tools.model_sweep.required import boxes  # built on this module's helpers: imported late

        inputs["bbox"] = boxes(SEQ)
    if main == "input_ids" and "pixel_values" in accepts and _contrastive(cfg):
        inputs["pixel_values"] = _pixels(cfg)  # CLIP-style dual encoders embed both
    sample = inspect.signature(model.forward).parameters.get("sample")
    if sample is not None and sample.default is True:
        # a σ-VAE's forward draws noise for its latents (VibeVoice's tokenizers): tpu's generator is not the CPU's
        inputs["sample"] = False
    encoder_decoder = getattr(cfg, "is_encoder_decoder", False)
    if encoder_decoder and head == "classification" and main == "input_ids":
        # BART-style classification heads read the decoder state at each row's last eos and make the decoder's
        # inputs from input_ids (shifted right): every row ends in eos, and no decoder_input_ids are given.
        eos = getattr(cfg, "eos_token_id", None)
        if isinstance(eos, int):
            inputs["input_ids"][:, -1] = eos
    elif encoder_decoder and "decoder_input_ids" in accepts:
        inputs["decoder_input_ids"] = token_ids(cfg, (BATCH, DECODER_SEQ), seed=3)
    return inputs


def input_candidates(model: Any, head: str) -> list[dict[str, torch.Tensor]]:
    """make_inputs, then the same inputs in the other layouts models of one main input name disagree on: audio
    features as (batch, mel, frames), (batch, frames, mel) or four frames stacked per row, waveforms with or without
    a channel dimension, images at twice the configured size (for stems that pool more than the tiny size allows), a
    clip of `num_frames` images for video models; then, for a forward whose required parameters those leave out,
    `required.required_candidates`. The worker keeps the first that the model runs on the CPU."""
    from tools.model_sweep.required import required_candidates  # built on this module's helpers: imported late

    first = make_inputs(model, head)
    out = [first]
    codebooks = _codebooks(model.config)
    for key, value in first.items():
        if key == "input_features" and value.dim() == 3:
            out.append({**first, key: value.transpose(1, 2).contiguous()})
            mel = getattr(_sub(model.config, "audio_config", "encoder_config"), "num_mel_bins", None)
            if isinstance(mel, int):  # frames stacked four at a time (Granite Speech's feature extractor)
                out.append({**first, key: torch.randn(value.shape[0], SEQ * 2, 4 * mel, generator=_gen(2))})
        elif key == "input_values" and value.dim() == 2:
            out.append({**first, key: value.unsqueeze(1)})
            # codecs whose strided encoders need more than a tenth of a second (at 16 kHz): one second, mono
            out.append({**first, key: torch.randn(value.shape[0], 1, 10 * AUDIO_SAMPLES, generator=_gen(2))})
            width = getattr(model.config, "hidden_size", None)
            if isinstance(width, int):  # a base model without its speech pre-nets (SpeechT5): frames already embedded
                frames = {key: torch.randn(value.shape[0], SEQ, width, generator=_gen(2))}
                if "decoder_input_values" in forward_params(model):
                    frames["decoder_input_values"] = torch.randn(value.shape[0], DECODER_SEQ, width, generator=_gen(3))
                out.append({**first, **frames})
            mel, frames = getattr(model.config, "num_mel_bins", None), getattr(model.config, "max_length", None)
            if isinstance(mel, int) and isinstance(frames, int):  # spectrogram models: (batch, frames, mel)
                out.append({**first, key: torch.randn(value.shape[0], frames, mel, generator=_gen(2))})
        elif key == "input_ids" and codebooks > 1:  # MusicGen's decoder: one row per codebook
            rows = value.shape[0] * codebooks
            out.append({**first, key: token_ids(model.config, (rows, value.shape[1]), seed=1)})
        elif key == "pixel_values" and value.dim() == 4:
            h, w = value.shape[-2:]
            # keypoint matchers (SuperGlue, LightGlue, EfficientLoFTR): a pair of images per sample
            out.append({**first, key: torch.stack([value, torch.randn(value.shape, generator=_gen(6))], dim=1)})
            out.append({**first, key: torch.randn(*value.shape[:2], 2 * h, 2 * w, generator=_gen(2))})
            frames = getattr(_sub(model.config, "vision_config"), "num_frames", None)
            if isinstance(frames, int) and frames > 0:  # video models: (batch, frames, channels, height, width)
                clip = torch.randn(value.shape[0], frames, *value.shape[1:], generator=_gen(2))
                out.append({**first, key: clip})
                out.append({**first, key: clip.flatten(0, 1)})  # or every frame a row (X-CLIP's vision tower)
            else:  # models taking a list of images per sample (IDEFICS): one image each, seen by every token
                one = {**first, key: value.unsqueeze(1)}
                ids = first.get("input_ids")
                if ids is not None and "image_attention_mask" in forward_params(model):
                    one["image_attention_mask"] = torch.ones(*ids.shape, 1, dtype=torch.long)
                out.append(one)
    return out + required_candidates(model, first)


def _codebooks(cfg: Any) -> int:
    value = getattr(cfg, "num_codebooks", None)
    return value if isinstance(value, int) else 0


def make_labels(model: Any, head: str, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
    cfg = model.config
    ids, codebooks = inputs.get("input_ids"), _codebooks(cfg)
    if head in WITH_LOSS and ids is not None and codebooks > 1 and ids.shape[0] == BATCH * codebooks:
        return ids.view(BATCH, codebooks, -1).transpose(1, 2)  # (batch, positions, codebooks)
    if head == "classification":
        return torch.arange(BATCH) % max(2, int(getattr(cfg, "num_labels", 2)))
    encoder_decoder = getattr(cfg, "is_encoder_decoder", False)
    if head == "seq2seq_lm" and not encoder_decoder and "input_ids" in inputs:
        return inputs["input_ids"]  # a decoder-only speech LM (audio features spliced into the prompt)
    if head == "seq2seq_lm" or (head != "base" and encoder_decoder):
        return token_ids(cfg, (BATCH, DECODER_SEQ), seed=3)
    if head in WITH_LOSS and "input_ids" in inputs:
        return inputs["input_ids"]
    return None


def generate_kwargs(model: Any) -> dict[str, Any]:
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    pad = getattr(text, "pad_token_id", None)
    eos = getattr(text, "eos_token_id", None)
    if pad is None:
        pad = eos if isinstance(eos, int) else 0
    extra: dict[str, Any] = {}
    if getattr(model.config, "is_encoder_decoder", False):
        start = getattr(model.config, "decoder_start_token_id", None)
        if start is None and getattr(model.config, "bos_token_id", None) is None:
            extra["decoder_start_token_id"] = pad  # configs that leave both unset (T5-style ones start at pad)
    return {
        **extra,
        "max_new_tokens": GENERATE_TOKENS,
        "min_new_tokens": GENERATE_TOKENS,
        "do_sample": False,
        "pad_token_id": pad,
    }
