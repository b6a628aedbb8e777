"""The sweep's diffusers source: every model class diffusers exports, tiny, with inputs made from its forward's names.

A class's tiny configuration starts from its constructor's defaults (a full-size model) and shrinks every size field
by name: widths to WIDTH, heads to HEADS of HEAD_DIM, depths to one or two, channel lists to CHANNELS wide, the latent
to LATENT pixels; rotary axis lists are rescaled to sum to the head width. OVERRIDES holds per-class corrections
where the generic shrink is invalid. Inputs are made by parameter name (sample or hidden_states as an image, a video
or a token sequence, timestep, text states and pooled text, position ids, guidance, control images) from the
configuration; the first candidate set the class's CPU forward accepts is the one compared.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

BATCH = 2
WIDTH = 32
HEADS = 2
HEAD_DIM = WIDTH // HEADS
FFN = 64
CHANNELS = 32
LATENT = 16  # latent image side (pixels of the latent grid)
FRAMES = 3  # video latent frames (causal video VAEs want 1 + 2k)
TEXT = 8  # text tokens of the conditioning sequence
VOCAB = 64
# Diffusion times as flow-matching pipelines pass them (a sigma in [0, 1]); DDPM-style UNets take them too (their
# sinusoidal embedding is continuous). Models that scale the time by 1000 before its sinusoidal embedding (Flux,
# AuraFlow) would see arguments near 5e5 from DDPM-style times of hundreds, where a one-ulp difference in exp (XLA's
# exp is within 1 ulp, CPU's within 0.55) moves sin by 0.03: that tests exp's last bit, not the model.
TIMESTEPS = torch.tensor([0.3, 0.8])

MAX_PARAMS = 20_000_000  # a shrunk configuration still larger than this is refused before it is built

_DEPTH_ONE = {"layers_per_block", "num_res_blocks", "num_refiner_layers", "n_refiner_layers", "num_text_blocks"}
_DEPTH_ONE |= {"transformer_layers_per_block", "temporal_transformer_layers_per_block", "num_visual_blocks"}
_DEPTH_TWO = {"num_layers", "num_single_layers", "depth", "n_layers", "num_hidden_layers", "nlayers"}
_DEPTH_TWO |= {"num_double_layers", "num_mmdit_layers", "num_layers_single", "num_attention_pooler_hidden_layers"}
_HEADS = {"num_attention_heads", "num_heads", "n_heads", "nheads", "num_cross_attention_heads"}
_HEADS |= {"decoder_num_attention_heads", "motion_num_attention_heads", "audio_num_attention_heads"}
_HEADS |= {"block_num_heads"}
_KV = {"num_key_value_heads", "num_kv_heads", "n_kv_heads", "num_key_value_attention_heads"}
_HEAD_DIM = {"attention_head_dim", "head_dim", "cross_attention_head_dim", "audio_attention_head_dim", "d_kv"}
_HEAD_DIM |= {"decoder_head_dim"}
_FFN = {"intermediate_size", "ffn_dim", "ff_dim", "ffn_hidden_size", "d_ff"}
_WIDTHS = {"ch", "channels", "base_dim", "decoder_base_dim", "d_model", "dim", "model_dim", "upsample_initial_channel"}
_WIDTHS |= {"txt_in_features", "input_dims"}
_CHANNEL_LISTS = {"block_out_channels", "decoder_block_out_channels", "encoder_block_out_channels"}
_CHANNEL_LISTS |= {"conditioning_embedding_out_channels", "channels"}
_ROPE_AXES = {"axes_dims_rope", "axes_dims", "rope_axes_dim", "rope_dim_list", "axes_dim", "axes_dim_rope", "rope_dim"}
_VOCAB = {"vocab_size", "codebook_size", "num_vector_embeds"}
_KEEP = {"in_channels", "out_channels", "latent_channels", "patch_size", "patch_size_t", "sample_size", "z_dim"}
_KEEP |= {"freq_dim", "time_embed_dim", "num_train_timesteps", "num_embeds_ada_norm", "num_class_embeds"}
_KEEP |= {"conditioning_channels", "norm_num_groups", "sample_rate", "sampling_rate", "hop_length"}
# SVD's added time ids: three values, each embedded addition_time_embed_dim wide, projected from their concatenation
_KEEP |= {"projection_class_embeddings_input_dim", "addition_time_embed_dim"}
_WIDTH_SUFFIXES = ("_dim", "_size", "_channels", "hidden_size", "dim")
_NOT_WIDTH = ("sample", "patch", "kernel", "stride", "window", "freq", "time", "max", "pos", "rope", "len", "scale")

# Per-class corrections, merged over the shrunk defaults.
OVERRIDES: dict[str, dict[str, Any]] = {
    # the Fourier timestep embedding (2 x the first block's width) is concatenated to the input's channels
    "UNet1DModel": {"extra_in_channels": 2 * CHANNELS},
    # 9 video frames make 3 latent frames at its 4x temporal compression
    "CogVideoXTransformer3DModel": {"sample_frames": 9},
    "ConsisIDTransformer3DModel": {"sample_frames": 9},
    # classes whose defaults leave the input kind open (None): a patched latent of 4 channels
    "HunyuanDiT2DModel": {"in_channels": 4, "patch_size": 2, "cross_attention_dim_t5": WIDTH, "text_len_t5": TEXT},
    "HunyuanDiT2DControlNetModel": {"in_channels": 4, "patch_size": 2, "cross_attention_dim_t5": WIDTH},
    "LatteTransformer3DModel": {
        "in_channels": 4,
        "out_channels": 8,
        "patch_size": 2,
        "caption_channels": WIDTH,
        "cross_attention_dim": WIDTH,
        "num_embeds_ada_norm": 1000,
        "norm_type": "ada_norm_single",
        "video_length": FRAMES,
    },
    "Transformer2DModel": {"in_channels": CHANNELS, "cross_attention_dim": WIDTH},
    "TransformerTemporalModel": {"in_channels": CHANNELS},
    "LuminaNextDiT2DModel": {"num_kv_heads": HEADS},
    "Kandinsky3UNet": {"groups": 8, "block_out_channels": (2 * CHANNELS,) * 4, "time_embedding_dim": 2 * WIDTH},
    "PriorTransformer": {"num_embeddings": TEXT},
    # two levels are enough; the defaults' four make the latent smaller than a patch
    "UNetSpatioTemporalConditionModel": {
        "num_attention_heads": (HEADS, HEADS),
        "block_out_channels": (CHANNELS, CHANNELS),
        "down_block_types": ("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        "up_block_types": ("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
    },
    "UNetMotionModel": {
        "block_out_channels": (CHANNELS, CHANNELS),
        "down_block_types": ("CrossAttnDownBlockMotion", "DownBlockMotion"),
        "up_block_types": ("UpBlockMotion", "CrossAttnUpBlockMotion"),
    },
    # the decoder reads the latent: half the encoder's output (means and log-variances)
    "AutoencoderOobleck": {"decoder_input_channels": WIDTH // 2},
    # five micro-conditions, each encoded micro_cond_encode_dim wide
    "UVit2DModel": {"in_channels": WIDTH, "micro_cond_embed_dim": 5 * WIDTH},
    # its text encoder's own heads and depth (names the generic shrink does not know)
    "Krea2Transformer2DModel": {"num_text_layers": 2, "text_num_attention_heads": HEADS, "text_num_key_value_heads": 1},
    # a DINOv2 encoder of two layers whose 16-pixel patches tile the 32-pixel input, 64 wide (its heads are 64 wide)
    "AutoencoderRAE": {
        "encoder_patch_size": 16,
        "encoder_num_hidden_layers": 2,
        "encoder_hidden_size": 64,
        "decoder_num_hidden_layers": 2,
    },
    "WanVACETransformer3DModel": {"vace_layers": [0, 1]},  # a VACE block beside each of the two layers
}


# Exported classes that are not models of their own, with the reason the sweep does not build them.
_CONTAINER = "a container that runs a list of models of another class (each of those is swept)"
SKIPPED: dict[str, str] = {
    **dict.fromkeys(
        (
            "MultiAdapter",
            "MultiControlNetModel",
            "SD3MultiControlNetModel",
            "FluxMultiControlNetModel",
            "QwenImageMultiControlNetModel",
            "HunyuanDiT2DMultiControlNetModel",
        ),
        _CONTAINER,
    ),
    "ControlNetXSAdapter": "runs only inside UNetControlNetXSModel (which is swept)",
    "MotionAdapter": "holds motion modules for UNetMotionModel (which is swept); it has no forward of its own",
}


def _per_frame_text(inputs: dict[str, Any]) -> dict[str, Any]:
    """AnimateDiff's UNet attends to the text once per frame: (batch x frames, tokens, width)."""
    main = inputs["sample"]
    if main.dim() == 5 and "encoder_hidden_states" in inputs:
        inputs["encoder_hidden_states"] = inputs["encoder_hidden_states"].repeat_interleave(main.shape[2], 0)
    return inputs


def _text_layers(layers: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Krea 2 reads every layer of its text encoder: (batch, tokens, layers, width), here the same states each."""

    def fix(inputs: dict[str, Any]) -> dict[str, Any]:
        text = inputs["encoder_hidden_states"]
        return {**inputs, "encoder_hidden_states": text.unsqueeze(2).repeat(1, 1, layers, 1)}

    return fix


def _drop(*names: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda inputs: {k: v for k, v in inputs.items() if k not in names}


# Per-class corrections of the inputs made by name.
INPUT_FIXES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "UNetMotionModel": _per_frame_text,
    "LatteTransformer3DModel": _drop("encoder_attention_mask"),  # its per-frame attention has no mask
    "TransformerTemporalModel": _drop("encoder_hidden_states"),  # temporal self-attention only
    "Krea2Transformer2DModel": _text_layers(2),  # its override's num_text_layers
}


def model_classes() -> list[str]:
    """Every ModelMixin subclass diffusers exports at its top level, by name."""
    import diffusers

    out = []
    for name in dir(diffusers):
        try:
            obj = getattr(diffusers, name)
        except Exception:
            continue
        if inspect.isclass(obj) and issubclass(obj, diffusers.ModelMixin) and obj is not diffusers.ModelMixin:
            out.append(name)
    return sorted(out)


def _defaults(cls: type) -> dict[str, Any]:
    params = inspect.signature(cls.__init__).parameters
    return {k: p.default for k, p in params.items() if k != "self" and p.default is not inspect.Parameter.empty}


def _rescale_axes(axes: Any, total: int) -> list[int]:
    """Rotary axis widths rescaled to sum to `total`, each even."""
    axes = [int(a) for a in axes]
    s = sum(axes) or 1
    out = [max(2, 2 * round(a * total / s / 2)) for a in axes[:-1]]
    out.append(total - sum(out))
    return out


def _int_list(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, int) for v in value)


def _is_width(name: str, value: Any) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value > WIDTH
        and name.rstrip("0123456789").endswith(_WIDTH_SUFFIXES)  # in_text_dim2: a second text encoder's width
        and not any(w in name for w in _NOT_WIDTH)
    )


def _shrink(name: str, value: Any) -> Any:
    if name in _KEEP or value is None:
        return value
    if name in _DEPTH_ONE and isinstance(value, int):
        return 1
    if name in _DEPTH_ONE and isinstance(value, (tuple, list)):
        return type(value)(1 for _ in value)
    if name in _DEPTH_TWO and isinstance(value, int):
        return min(value, 2)
    if name in _HEADS and isinstance(value, int):
        return HEADS
    if name in _HEADS and _int_list(value):
        return type(value)(HEADS for _ in value)
    if name in _KV and isinstance(value, int):
        return 1
    if name in _HEAD_DIM and isinstance(value, int):
        return HEAD_DIM
    if name in _FFN and isinstance(value, int):
        return FFN
    if name in _VOCAB and isinstance(value, int):
        return VOCAB
    if name in _ROPE_AXES and isinstance(value, (tuple, list)):
        return type(value)(_rescale_axes(value, HEAD_DIM))
    if name in _WIDTHS and isinstance(value, int) and not isinstance(value, bool) and value > WIDTH:
        return 2 * WIDTH if name == "upsample_initial_channel" else WIDTH  # halved once per upsampling
    if (name in _CHANNEL_LISTS or name.endswith("_channels")) and _int_list(value) and min(value) > WIDTH:
        return type(value)(CHANNELS for _ in value)
    if name in _CHANNEL_LISTS and isinstance(value, (tuple, list)):
        return type(value)(CHANNELS for _ in value)
    if (name.startswith("num_") and name.endswith("_blocks")) and isinstance(value, int) and value > 1:
        return 1
    if name.endswith("_depths") and _int_list(value):
        return type(value)(1 for _ in value)
    if name.endswith("layers_per_block") and isinstance(value, (tuple, list)):
        return type(value)(1 for _ in value)
    if (name.endswith("dropout") or name == "dropout_rate") and isinstance(value, float):
        return 0.0
    if _is_width(name, value):
        return WIDTH
    return value


def tiny_config(class_name: str) -> dict[str, Any]:
    import diffusers

    cls = getattr(diffusers, class_name)
    cfg = {k: _shrink(k, v) for k, v in _defaults(cls).items()}
    for k in ("sample_size", "sample_height", "sample_width"):
        if isinstance(cfg.get(k), int) and cfg[k] > LATENT:
            cfg[k] = LATENT
    for k in ("max_text_seq_length", "text_len"):
        if isinstance(cfg.get(k), int):
            cfg[k] = TEXT
    cfg.update(OVERRIDES.get(class_name, {}))
    return cfg


def no_dropout(model: Any) -> Any:
    """Every dropout module of `model` set to p=0 (returned). Some blocks fix their rate in code, not in the
    configuration (UNet3D's temporal convolutions: 0.1), and a training step draws its masks from each device's own
    generator: it would compare two different random models."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
    return model


def build(class_name: str) -> Any:
    """The class built from its tiny configuration (parameters counted on the meta device first: a configuration the
    shrink missed raises instead of filling the host's memory)."""
    import diffusers

    cls, cfg = getattr(diffusers, class_name), tiny_config(class_name)
    with torch.device("meta"):
        n = sum(p.numel() for p in cls(**cfg).parameters())
    if n > MAX_PARAMS:
        raise ValueError(f"the shrunk configuration still has {n:,} parameters (the sweep builds up to {MAX_PARAMS:,})")
    return no_dropout(cls(**cfg))


# ---- inputs ----------------------------------------------------------------------------------------------------------


def _cfg(model: Any) -> dict[str, Any]:
    return dict(model.config)


def _first(cfg: dict[str, Any], names: tuple[str, ...], default: int) -> int:
    for n in names:
        v = cfg.get(n)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return default


def _in_channels(cfg: dict[str, Any]) -> int:
    names = ("in_channels", "latent_channels", "in_visual_dim", "z_dim", "input_channels", "audio_channels")
    names += ("io_channels",)
    return _first(cfg, names, 4)


def _text_width(cfg: dict[str, Any]) -> int:
    names = ("cross_attention_dim", "joint_attention_dim", "caption_channels", "text_embed_dim", "text_dim")
    names += ("encoder_hid_dim", "cap_feat_dim", "text_hidden_dim", "in_text_dim", "context_in_dim", "text_encoder_dim")
    v = cfg.get("cross_attention_dim")
    if isinstance(v, (tuple, list)):
        return int(v[0])
    return _first(cfg, names, WIDTH)


def _gen(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _main_layouts(cfg: dict[str, Any], main: str) -> Iterator[tuple[str, Any]]:
    """(layout, tensor) candidates for the main input: an image latent, a video latent (channels first or frames
    first), a token sequence of latent patches, a 1-D signal (short, then long enough for an audio autoencoder's
    strides), a pixel image, a vector, token ids."""
    c = _in_channels(cfg)
    side = cfg.get("sample_size") if isinstance(cfg.get("sample_size"), int) else LATENT
    side = max(8, min(int(side), LATENT))
    if main in ("input_ids", "x_ids"):
        yield "token_ids", torch.randint(0, VOCAB, (BATCH, side, side), generator=torch.Generator().manual_seed(0))
        return
    yield "image", _gen(BATCH, c, side, side)
    yield "video", _gen(BATCH, c, FRAMES, side, side)
    yield "video_frames_first", _gen(BATCH, FRAMES, c, side, side)
    yield "video", _gen(BATCH, c, 1 + 8, side, side)  # video autoencoders compressing time 4x or 8x: 1 + 8k frames
    if c == 3:  # ... and space up to 32x (pixels)
        yield "video", _gen(BATCH, c, 1 + 8, 4 * side, 4 * side)
    yield "tokens", _gen(BATCH, (side // 2) ** 2, c)
    yield "signal", _gen(BATCH, c, 64)
    yield "long_signal", _gen(BATCH, c, 4096)
    yield "image_3ch", _gen(BATCH, 3, 4 * side, 4 * side)
    yield "vector", _gen(BATCH, _first(cfg, ("embedding_dim", "hidden_size", "redux_dim"), c))


def _ids(n: int, axes: int = 3) -> torch.Tensor:
    """Position ids of n tokens on a grid four wide: (n, axes), the first axis (and any past the third) zero."""
    i = torch.arange(n).float()
    cols = [torch.zeros(n), i // 4, i % 4] + [torch.zeros(n)] * max(0, axes - 3)
    return torch.stack(cols[:axes], dim=-1)


def _id_axes(cfg: dict[str, Any]) -> int:
    axes = next((cfg[k] for k in _ROPE_AXES if isinstance(cfg.get(k), (tuple, list))), None)
    return len(axes) if axes else 3


def _grid(main: torch.Tensor, layout: str) -> tuple[int, int, int]:
    """(frames, height, width) of the main input's patch grid (patches of 2x2; a token sequence is square)."""
    if layout == "tokens":
        side = int(round(main.shape[1] ** 0.5))
        return 1, side, side
    frames = main.shape[2] if layout == "video" else (main.shape[1] if layout == "video_frames_first" else 1)
    return frames, main.shape[-2] // 2, main.shape[-1] // 2


# Inputs made by parameter name when the forward takes them: name -> (config, main input, layout) -> value.
_BY_NAME: dict[str, Callable[[dict[str, Any], torch.Tensor, str], Any]] = {
    "pooled_projections": lambda c, m, lay: _gen(BATCH, _first(c, ("pooled_projection_dim",), WIDTH), seed=2),
    "txt_ids": lambda c, m, lay: torch.zeros(TEXT, _id_axes(c)),
    "encoder_attention_mask": lambda c, m, lay: torch.ones(BATCH, TEXT, dtype=torch.bool),
    "added_time_ids": lambda c, m, lay: torch.tensor([[6.0, 127.0, 0.02]] * BATCH),
    "original_size": lambda c, m, lay: torch.tensor([[64.0, 64.0]] * BATCH),
    "target_size": lambda c, m, lay: torch.tensor([[64.0, 64.0]] * BATCH),
    "crop_coords": lambda c, m, lay: torch.tensor([[0.0, 0.0]] * BATCH),
    "fps": lambda c, m, lay: torch.tensor([8, 8]),
    "image_latents": lambda c, m, lay: _gen(*m.shape, seed=4),
    "proj_embedding": lambda c, m, lay: _gen(BATCH, _first(c, ("embedding_dim",), WIDTH), seed=4),
    "pooled_text_emb": lambda c, m, lay: _gen(BATCH, _first(c, ("cond_embed_dim",), WIDTH), seed=4),
    "micro_conds": lambda c, m, lay: torch.tensor([[64.0, 64.0, 0.0, 0.0, 6.0]] * BATCH),
    "global_hidden_states": lambda c, m, lay: _gen(BATCH, 1, _first(c, ("global_states_input_dim",), WIDTH), seed=4),
    "text_embedding_mask": lambda c, m, lay: torch.ones(BATCH, TEXT, dtype=torch.long),
    "encoder_hidden_states_t5": lambda c, m, lay: _gen(BATCH, TEXT, _first(c, ("cross_attention_dim_t5",), WIDTH)),
    "text_embedding_mask_t5": lambda c, m, lay: torch.ones(BATCH, TEXT, dtype=torch.long),
    "image_meta_size": lambda c, m, lay: torch.tensor([[64.0, 64.0, 64.0, 64.0, 0.0, 0.0]] * BATCH),
    "style": lambda c, m, lay: torch.zeros(BATCH, dtype=torch.long),
    "img_shapes": lambda c, m, lay: [[_grid(m, lay)]] * BATCH,
    "timestep_ratio": lambda c, m, lay: torch.tensor([0.5, 0.5]),
    "image_embeddings": lambda c, m, lay: _gen(BATCH, _text_width(c), seed=5),
    "clip_text_pooled": lambda c, m, lay: _gen(BATCH, 1, _first(c, ("clip_text_pooled_in_channels",), WIDTH), seed=5),
    "r_timestep": lambda c, m, lay: TIMESTEPS * 0.5,  # AnyFlow's second time (r <= t, as in mean-flow models)
    "img_mask": lambda c, m, lay: torch.ones(BATCH, math.prod(_grid(m, lay)), dtype=torch.bool),  # every patch valid
    # the text's positions then the image patches' (Krea 2): one column per rotary axis
    "position_ids": lambda c, m, lay: _ids(TEXT + math.prod(_grid(m, lay)), _id_axes(c)),
    # VACE's control video: the main latent's frames and size, vace_in_channels deep
    "control_hidden_states": lambda c, m, lay: _gen(
        m.shape[0], _first(c, ("vace_in_channels",), m.shape[1]), *m.shape[2:], seed=3
    ),
}


def _extras(params: set[str], cfg: dict[str, Any], main: torch.Tensor, layout: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tw = _text_width(cfg)
    if "timestep" in params or "timesteps" in params or "t" in params:
        key = "timestep" if "timestep" in params else ("timesteps" if "timesteps" in params else "t")
        out[key] = TIMESTEPS.clone()
    if "encoder_hidden_states" in params:
        out["encoder_hidden_states"] = _gen(BATCH, TEXT, tw, seed=1)
    if "class_labels" in params and (cfg.get("num_embeds_ada_norm") or cfg.get("num_class_embeds")):
        out["class_labels"] = torch.tensor([1, 3])
    if "guidance" in params and cfg.get("guidance_embeds"):
        out["guidance"] = torch.tensor([3.5, 3.5])
    if "img_ids" in params:
        f, h, w = _grid(main, layout)
        out["img_ids"] = _ids(f * h * w, _id_axes(cfg))
    if "controlnet_cond" in params:
        embeds_image = any(k.endswith("conditioning_embedding_out_channels") and v for k, v in cfg.items())
        if embeds_image and layout == "image":
            # a UNet ControlNet embeds a control image at eight times the latent's size
            side = [8 * s for s in main.shape[2:]]
            out["controlnet_cond"] = _gen(BATCH, _first(cfg, ("conditioning_channels",), 3), *side, seed=3)
        else:  # a transformer ControlNet takes its control as a latent like the main input
            out["controlnet_cond"] = _gen(*main.shape, seed=3)
    if {"num_frames", "height", "width"} <= params and layout == "tokens":
        out.update(zip(("num_frames", "height", "width"), _grid(main, layout), strict=True))
    out.update({k: make(cfg, main, layout) for k, make in _BY_NAME.items() if k in params})
    return out


def input_candidates(model: Any) -> list[dict[str, Any]]:
    params = [p for p in inspect.signature(model.forward).parameters if p != "self"]
    if not params:
        return [{}]
    cfg = _cfg(model)
    main = params[0]
    names = set(params)
    fix = INPUT_FIXES.get(type(model).__name__, lambda inputs: inputs)
    return [fix({main: t, **_extras(names, cfg, t, layout)}) for layout, t in _main_layouts(cfg, main)]


def output_tensor(out: Any) -> torch.Tensor:
    """The tensor a training step regresses: the output's first floating tensor."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        vals: list[Any] = list(out.values())
    elif isinstance(out, (tuple, list)):
        vals = list(out)
    else:
        vals = [getattr(out, k) for k in ("sample", "latent_dist") if hasattr(out, k)]
    for v in vals:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v
        if hasattr(v, "mean") and isinstance(getattr(v, "mean", None), torch.Tensor):
            return v.mean
        if isinstance(v, (dict, tuple, list)) or hasattr(v, "sample"):
            try:
                return output_tensor(v)
            except TypeError:
                continue
    raise TypeError(f"no floating tensor in a {type(out).__name__}")


ForwardFn = Callable[[Any, dict[str, Any]], Any]
