"""Inputs for the required forward parameters `heads.make_inputs` does not make: the sub-models that a composite
model calls with what its processor or its parent prepared (vision towers fed flattened patches and a grid,
encoders fed `hidden_states`). Each function returns candidate input sets; the worker keeps the first the model's
CPU forward accepts, so a wrong guess costs one CPU call and a right one turns a type from "error on the CPU too"
into a compared run."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from tools.model_sweep.heads import AUDIO_SAMPLES, BATCH, SEQ, _gen, _sub, token_ids

FRAMES = 32  # sequence length of made-up features
GRIDS = ("grid_thw", "image_grid_thw")
MASKS = ("mask", "attention_mask", "padding_mask")


def required_params(model: torch.nn.Module) -> list[str]:
    """The forward parameters without a default (named ones: not *args/**kwargs)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        name
        for name, p in inspect.signature(model.forward).parameters.items()
        if p.kind in kinds and p.default is inspect.Parameter.empty
    ]


def _int(cfg: Any, *names: str, default: int) -> int:
    for name in names:
        value = getattr(cfg, name, None)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], int):
            value = value[0]
        if isinstance(value, int) and value > 0:
            return value
    return default


def patch_candidates(model: Any, required: list[str]) -> list[dict[str, torch.Tensor]]:
    """Qwen-VL-style vision towers: patches of two images, flattened as the processor flattens them, and their
    (t, h, w) grid; the grid's sides are two merge windows so that the patch merger pools whole windows."""
    grid_name = next((g for g in GRIDS if g in required), None)
    patches_name = next((n for n in required if n in ("hidden_states", "pixel_values")), None)
    if grid_name is None or patches_name is None:
        return []
    cfg = _sub(model.config, "vision_config")
    patch = _int(cfg, "patch_size", default=8)
    channels = _int(cfg, "in_channels", "num_channels", "in_chans", default=3)
    temporal = _int(cfg, "temporal_patch_size", default=2)
    merge = _int(cfg, "spatial_merge_size", "merge_size", default=1)
    side = 2 * merge
    grid = torch.tensor([[1, side, side]] * BATCH)
    count = BATCH * side * side
    shapes = [  # a tower whose config names no temporal patch size may still embed two frames per patch
        (count, channels * temporal * patch * patch),
        (count, channels * patch * patch),
        (count, channels, temporal, patch, patch),
        (count, channels, patch, patch),
        (1, count, channels * patch * patch),
    ]
    out = []
    for shape in dict.fromkeys(shapes):
        inputs = {patches_name: torch.randn(*shape, generator=_gen(2)), grid_name: grid}
        if "merge_sizes" in required:
            inputs["merge_sizes"] = torch.tensor([merge] * BATCH)
        out.append(inputs)
    return out


def hidden_state_candidates(model: Any, required: list[str]) -> list[dict[str, torch.Tensor]]:
    """A module whose one required input is `hidden_states` (an encoder or backbone its parent feeds): images,
    feature frames of the configured width, or a waveform."""
    masks = [name for name in required if name in MASKS]
    if [name for name in required if name not in masks] != ["hidden_states"]:
        return []
    cfg = model.config
    vis = _sub(cfg, "vision_config")
    channels = _int(vis, "num_channels", "in_channels", "input_channels", default=3)
    size = _int(vis, "image_size", default=32)
    out = [{"hidden_states": torch.randn(BATCH, channels, size, size, generator=_gen(2))}]
    for name in ("input_dim", "input_size", "feature_size", "num_mel_bins", "input_feat_size", "hidden_size"):
        width = getattr(cfg, name, None)
        if isinstance(width, int) and width > 0:
            out.append({"hidden_states": torch.randn(BATCH, FRAMES, width, generator=_gen(2))})
    channels = _int(cfg, "channels", "audio_channels", default=1)
    for samples in (AUDIO_SAMPLES, 10 * AUDIO_SAMPLES):  # a codec's strides may want more than 0.1 s
        out.append({"hidden_states": torch.randn(BATCH, channels, samples, generator=_gen(2))})
    for inputs in out:  # every position valid, shaped as the input's leading (batch, positions) dimensions
        value = inputs["hidden_states"]
        inputs.update({name: torch.ones(value.shape[0], value.shape[-2], dtype=torch.bool) for name in masks})
    return out


def boxes(n: int) -> torch.Tensor:
    """(BATCH, n, 4) word boxes x0, y0, x1, y1 on a 0..1000 page, each of positive size."""
    corner = torch.randint(0, 500, (BATCH, n, 2), generator=_gen(5))
    return torch.cat([corner, corner + 1 + torch.randint(0, 400, (BATCH, n, 2), generator=_gen(6))], dim=-1)


def _time_features(cfg: Any) -> int:
    return int(getattr(cfg, "num_time_features", 0) or 0) + int(getattr(cfg, "num_dynamic_real_features", 0) or 0)


def named_candidates(model: Any, required: list[str], first: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """`first` completed with the inputs the sweep can make by name alone: the required ones (token ids beside a
    video or image, a Q-Former's own prompt, word boxes, an in-context prompt image and mask, a time series'
    padding mask and frequency class), else the optional other half of an image-and-text model (ViLT, IDEFICS,
    Kosmos-2: the forward takes either side as optional but needs both)."""
    from tools.model_sweep.heads import _pixels, forward_params

    main = next(iter(first.values()))
    makers = {
        "input_ids": lambda: token_ids(model.config, (BATCH, SEQ), seed=1),
        "qformer_input_ids": lambda: token_ids(_sub(model.config, "qformer_config"), (BATCH, SEQ), seed=4),
        "bbox": lambda: boxes(first["input_ids"].shape[1] if "input_ids" in first else SEQ),
        "past_values_padding": lambda: torch.zeros(main.shape[:2]),
        # forecasters (TimeSeriesTransformer, Informer, Autoformer): time features of the context, all observed
        "past_time_features": lambda: torch.randn(*main.shape[:2], _time_features(model.config), generator=_gen(7)),
        "past_observed_mask": lambda: torch.ones(main.shape),
        "freq": lambda: torch.zeros(BATCH, 1, dtype=torch.long),
        "pixel_values": lambda: _pixels(model.config),
        "input_values": lambda: torch.randn(BATCH, 1, 10 * AUDIO_SAMPLES, generator=_gen(2)),  # a second, mono
        "prompt_pixel_values": lambda: _pixels(model.config),
        "prompt_masks": lambda: _pixels(model.config),
        # region features and boxes of a detector's output (LXMERT)
        "visual_feats": lambda: torch.randn(
            BATCH, 4, _int(model.config, "visual_feat_dim", default=32), generator=_gen(8)
        ),
        "visual_pos": lambda: torch.rand(BATCH, 4, _int(model.config, "visual_pos_dim", default=4), generator=_gen(9)),
    }
    missing = [name for name in required if name not in first]
    if not missing:
        accepts = forward_params(model)
        pairs = ("input_ids", "pixel_values", "visual_feats", "visual_pos")
        missing = [n for n in pairs if n in accepts and n not in first]
    if not missing or any(name not in makers for name in missing):
        return []
    return [{**first, **{name: makers[name]() for name in missing}}]


def patch_sequence(model: Any, first: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """NaFlex towers (SigLIP 2): each image as its sequence of flattened patches, with every patch valid and the
    (rows, columns) of its grid, as their processor hands them over."""
    from tools.model_sweep.heads import forward_params

    accepts = forward_params(model)
    if "pixel_values" not in first or not {"spatial_shapes", "pixel_attention_mask"} <= accepts:
        return []
    cfg = _sub(model.config, "vision_config")
    patch, channels = _int(cfg, "patch_size", default=8), _int(cfg, "num_channels", default=3)
    side = max(1, int(_int(cfg, "num_patches", default=16) ** 0.5))
    count = side * side
    return [
        {
            **first,
            "pixel_values": torch.randn(BATCH, count, channels * patch * patch, generator=_gen(2)),
            "pixel_attention_mask": torch.ones(BATCH, count, dtype=torch.long),
            "spatial_shapes": torch.tensor([[side, side]] * BATCH),
        }
    ]


def query_prompt(model: Any, first: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Models whose prompt holds the image's features in place of placeholder tokens, as their processors write it:
    one placeholder per Q-Former query (BLIP-2, InstructBLIP, with the Q-Former's own instruction where the forward
    takes one), or one per latent query marked by an image-position mask (Kosmos-2)."""
    from tools.model_sweep.heads import forward_params

    cfg = model.config
    accepts = forward_params(model)
    if "pixel_values" not in first:
        return []
    text = token_ids(cfg, (BATCH, SEQ), seed=1)
    image, queries = getattr(cfg, "image_token_id", None), getattr(cfg, "num_query_tokens", None)
    latents = getattr(cfg, "latent_query_num", None)
    if isinstance(image, int) and isinstance(queries, int):
        inputs = {**first, "input_ids": torch.cat([torch.full((BATCH, queries), image), text], dim=1)}
        if "qformer_input_ids" in accepts:
            inputs["qformer_input_ids"] = token_ids(_sub(cfg, "qformer_config"), (BATCH, SEQ), seed=4)
        return [inputs]
    if isinstance(latents, int) and "image_embeds_position_mask" in accepts:
        slots = torch.cat([torch.ones(BATCH, latents, dtype=torch.long), torch.zeros(BATCH, SEQ, dtype=torch.long)], 1)
        ids = torch.cat([text[:, :1].expand(BATCH, latents), text], dim=1)
        return [{**first, "input_ids": ids, "image_embeds_position_mask": slots}]
    return []


def required_candidates(model: Any, first: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Candidate inputs for the forward's required parameters that `first` (make_inputs) leaves out; none when it
    covers them all."""
    required = required_params(model)
    named = patch_sequence(model, first) + query_prompt(model, first) + named_candidates(model, required, first)
    if all(name in first for name in required):
        return named
    return named + patch_candidates(model, required) + hidden_state_candidates(model, required)
