"""A tiny configuration of any transformers model type, made from its config class defaults.

The defaults describe a full-size model; every size field is shrunk by name (hidden width, depth, heads, key/value
heads, feed-forward width, vocabulary, positions, image, patch and audio sizes, experts), nested sub-configurations
(text_config, vision_config, ...) recursively, and every dropout is set to zero so that a training step is
deterministic on both devices. OVERRIDES holds the few per-type corrections where the generic shrink is invalid.
"""

from __future__ import annotations

from typing import Any

HIDDEN = 32
INTERMEDIATE = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
VOCAB = 128
POSITIONS = 64
IMAGE = 32
PATCH = 8
EXPERTS = 4
MEL = 16
SOURCE_POSITIONS = 16  # encoder positions of speech models (their features are twice as long)

_HIDDEN = {"hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "dim", "model_dim", "word_embed_proj_dim"}
_HIDDEN |= {"hidden_dim", "text_embed_dim", "vision_embed_dim", "projection_dim", "d_embed"}
_SMALL_WIDTH = {"embedding_size": 16, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32}
_SMALL_WIDTH |= {"kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": HEAD_DIM, "qk_nope_head_dim": HEAD_DIM}
_SMALL_WIDTH |= {"v_head_dim": HEAD_DIM, "classifier_proj_size": 32, "xvector_output_dim": 32, "codevector_dim": 32}
_SMALL_WIDTH |= {"proj_codevector_dim": 32, "num_codevectors_per_group": 8, "num_conv_pos_embeddings": 16}
_SMALL_WIDTH |= {"num_conv_pos_embedding_groups": 2, "num_mel_bins": MEL, "input_feat_per_channel": MEL}
_SMALL_WIDTH |= {"max_source_positions": SOURCE_POSITIONS, "conv_kernel_size": 3, "rotary_dim": HEAD_DIM}
_INTERMEDIATE = {"intermediate_size", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim", "ffn_hidden_size"}
_INTERMEDIATE |= {"n_inner", "intermediate_size_mlp", "mlp_dim", "decoder_intermediate_size"}
_LAYERS = {"num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "decoder_layers"}
_LAYERS |= {"num_encoder_layers", "num_decoder_layers", "decoder_num_hidden_layers"}
_HEADS = {"num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads"}
_HEADS |= {"decoder_attention_heads", "decoder_num_attention_heads", "pred_num_attention_heads"}
_KV = {"num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"}
_HEAD_DIM = {"head_dim", "d_kv", "kv_channels", "attention_head_dim", "d_head"}
_VOCAB = {"vocab_size", "n_vocab", "decoder_vocab_size", "unpadded_vocab_size"}
_POSITIONS = {"max_position_embeddings", "n_positions", "n_ctx", "max_target_positions", "max_seq_len"}
_POSITIONS |= {"max_sequence_length", "seq_length"}
_EXPERTS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"}
_TOPK = {"num_experts_per_tok", "moe_topk", "num_selected_experts", "moe_k", "num_experts_per_token"}
_ONE = {"n_group": 1, "topk_group": 1}
_LIST_WIDTHS = {"hidden_sizes", "embed_dims", "dims", "neck_hidden_sizes", "embedding_dims"}
_ZERO_PROB = {"mask_time_prob", "mask_feature_prob", "layerdrop", "encoder_layerdrop", "decoder_layerdrop"}
# Sampling noise of a forward pass (VITS): drawn from the device's own generator (randn_like) on tpu and from the CPU
# generator on the CPU, whose states differ by whatever was drawn on the CPU before, as they would on CUDA.
_ZERO_PROB |= {"noise_scale", "noise_scale_duration"}
# Stochastic depth under other names (EfficientNet/ALIGN's drop_connect_rate, Grounding DINO's fusion_droppath): a
# training step draws its masks from each device's own generator, so it would compare two different random models.
_ZERO_PROB |= {"drop_connect_rate", "fusion_droppath"}
# Generic: any other integer width larger than this, named like a width, becomes HIDDEN.
_WIDTH_SUFFIXES = ("_size", "_dim", "_channels", "_rank", "_features")
_NOT_WIDTH = ("vocab", "position", "image", "patch", "window", "chunk", "batch", "sample", "kernel", "stride", "bucket")

# RT-DETR-style detectors: the encoder's inputs are the backbone's last three stages and the decoder's its width;
# fewer object queries than the tiny image has anchors (4x4 + 2x2 + 1x1).
_DETR_CHANNELS = {"encoder_in_channels": [32, 64, 128], "decoder_in_channels": [32, 32, 32], "num_queries": 8}
# ... over an HGNetV2 backbone whose stage widths follow its shrunk hidden_sizes (16 .. 128)
_HGNET_DETR = {
    **_DETR_CHANNELS,
    "backbone_config.stage_in_channels": [48, 16, 32, 64],
    "backbone_config.stage_mid_channels": [16, 16, 32, 64],
    "backbone_config.stage_out_channels": [16, 32, 64, 128],
}
# ReformerModelWithLMHead (the causal_lm head) insists on is_decoder; the base model runs either way.
_REFORMER = {
    "axial_pos_shape": [2, 4],
    "axial_pos_embds_dim": [16, 16],
    "local_attn_chunk_length": 4,
    "is_decoder": True,
}
_FOUR_LAYER_BACKBONE = {"backbone_config.num_hidden_layers": 4, "backbone_config.out_indices": [1, 2, 3, 4]}
_DOTS3_TEXT = {"per_layer_config": {}, "index_n_heads": 4, "head_dim": 16}
_QWEN4_INDEXER = {
    "indexer_n_heads": 2,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 8,
    "indexer_budget": 4,
    "indexer_compress_ratio": 2,
}
_COMPASS_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]}}

# DETR-family detectors default to a timm backbone (timm cannot be imported here, see docs/model_coverage.md):
# transformers' own ResNet instead, tiny, its four stages out (as DETR's use_timm_backbone=False checkpoints have it).
_RESNET_BACKBONE = {
    "use_timm_backbone": False,
    "backbone_config": {
        "model_type": "resnet",
        "embedding_size": 16,
        "hidden_sizes": [16, 32, 64, 128],
        "depths": [1, 1, 1, 1],
        "out_features": ["stage1", "stage2", "stage3", "stage4"],
    },
}

# SAM 2's Hiera backbone at a 32-pixel image (maps of 8, 4, 2, 1): stage widths doubling from 32, one block per
# stage but two in the third, whose second attends globally (a stage's first block pools queries and needs a window)
_HIERA = {
    "embed_dim_per_stage": [32, 64, 128, 256],
    "blocks_per_stage": [1, 1, 2, 1],
    "num_attention_heads_per_stage": [1, 1, 1, 1],
    "window_size_per_stage": [2, 2, 2, 2],
    "global_attention_blocks": [3],
    "window_positional_embedding_background_size": [2, 2],
}
# ... and its feature pyramid over the three finest stages (widest first), as wide as they are
_SAM2_VISION = {
    **{f"backbone_config.{k}": v for k, v in _HIERA.items()},
    "backbone_channel_list": [256, 128, 64, 32],
    "backbone_feature_sizes": [[8, 8], [4, 4], [2, 2]],
}

# Per-type corrections, applied to the shrunk top-level configuration (dotted keys reach sub-configurations).
OVERRIDES: dict[str, dict[str, Any]] = {
    **dict.fromkeys(("detr", "conditional_detr", "dab-detr", "table-transformer"), _RESNET_BACKBONE),
    # Mimi-style codecs' upsampling groups (one per channel) follow the tiny width
    # and their codebooks are as wide as the model
    **dict.fromkeys(
        ("mimi", "mimi_decoder"),
        {"upsample_groups": 32, "codebook_dim": 32, "vector_quantization_hidden_dimension": 32},
    ),
    "pocket_tts_audio_tokenizer_decoder": {"upsample_groups": 32},
    "kyutai_speech_to_text": {"codec_config.upsample_groups": 32, "codec_config.codebook_dim": 32},
    # fields the class defaults leave out that their modeling code reads (their checkpoints set them)
    "moonshine_streaming": {"num_key_value_heads": 4},
    "pix2struct_text_model": {"initializer_range": 0.02},
    "t5gemma2_encoder": {"text_config.dropout_rate": 0.0},
    "qwen3_omni_moe_talker_text": {"shared_expert_intermediate_size": 32},
    "dbrx": {"attn_config.rope_theta": 10000.0, "attn_config.clip_qkv": 8.0},
    # probabilistic forecasters: the horizon has no default (the context defaults to it)
    **dict.fromkeys(("autoformer", "informer", "time_series_transformer"), {"prediction_length": 4}),
    "deformable_detr": {
        **_RESNET_BACKBONE,
        "backbone_config": {**_RESNET_BACKBONE["backbone_config"], "out_features": ["stage2", "stage3", "stage4"]},
    },
    # Swin's last stage at one patch breaks its shifted-window mask: 64 pixels leave it 2 x 2, one window
    **dict.fromkeys(("swin", "donut-swin", "maskformer-swin"), {"window_size": 2, "image_size": 64}),
    # four stages (depths) however few layers: num_layers and the per-stage window sizes stay four long
    "swinv2": {"window_size": 2, "num_layers": 4, "pretrained_window_sizes": [0, 0, 0, 0]},
    "squeezebert": {"embedding_size": 32},  # its first layer has no projection: embeddings as wide as the model
    "bit": {"num_groups": 8},  # group norm over the 16-channel stem
    "longformer": {"attention_window": 4},
    "led": {"attention_window": 4},
    # ReformerModelWithLMHead (the causal_lm head) insists on is_decoder; the base model runs either way.
    "big_bird": {"attention_type": "original_full"},
    "bigbird_pegasus": {"attention_type": "original_full"},
    # Hybrids whose layer schedule is a period and an offset, not a list: one attention layer among the two.
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    # Zamba ties the shared transformer of every hybrid layer to the first (a lone hybrid layer fails): two of them
    # after one Mamba layer; their attention reads the input and the residual side by side (twice the width)
    "zamba": {"num_hidden_layers": 3, "layers_block_type": ["mamba", "hybrid", "hybrid"], "attention_hidden_size": 64},
    # Mamba-2 heads: n_heads * head_dim must equal expand * hidden_size (2 * 32).
    # ... and one of their two layers attention (the class defaults are all Mamba: generate's cache then has no
    # attention layer to size its mask from)
    "bamba": {"mamba_n_heads": 4, "mamba_d_head": 16, "attn_layer_indices": [1]},
    "granitemoehybrid": {"mamba_n_heads": 4, "mamba_d_head": 16, "layer_types": ["mamba", "attention"]},
    "mamba2": {"head_dim": 16, "n_groups": 2},  # groups divide the 4 heads
    # 8 heads of 8 = expand * hidden_size (2 * 32); its shared attention reads the input and the residual side by
    # side (twice the width); one Mamba layer, then one hybrid (its layer list and the ids derived from it, both)
    "zamba2": {
        "mamba_headdim": 8,
        "n_mamba_heads": 8,
        "attention_hidden_size": 64,
        "layers_block_type": ["mamba", "hybrid"],
        "hybrid_layer_ids": [1],
    },
    # the image placeholder their processors put in the prompt (checkpoints set it; the class default is None)
    **dict.fromkeys(("blip-2", "instructblip", "instructblipvideo"), {"image_token_id": 120}),
    # the prompt encoder's dense embedding covers the image encoder's grid (image_size / patch_size = 32 / 8), and the
    # shared positional embedding (twice num_pos_feats) is as wide as the model
    **dict.fromkeys(
        ("sam", "sam_hq"), {"prompt_encoder_config.image_embedding_size": 4, "vision_config.num_pos_feats": 16}
    ),
    # queries picked by top-k from the encoder's proposals: fewer than a tiny image has (the default is 900)
    **dict.fromkeys(("grounding-dino", "mm-grounding-dino"), {"num_queries": 4}),
    # mixtures of experts whose class defaults leave the expert counts None (their checkpoints set them)
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
    "diffusion_gemma": {
        "text_config.num_experts": 4,
        "text_config.top_k_experts": 2,
        "text_config.moe_intermediate_size": 16,
    },
    "diffusion_gemma_text": {"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 16},
    "sam2_hiera_det_model": _HIERA,
    "sam2_vision_model": _SAM2_VISION,
    # the prompt encoder's dense embedding covers the coarsest pyramid level (32 / 16 = 2)
    "sam2": {**{f"vision_config.{k}": v for k, v in _SAM2_VISION.items()}, "prompt_encoder_config.patch_size": 16},
    # its multimodal rotary rotates a multiple of 4 dims: half the tiny 8-wide head (the default quarter is 2)
    "neomme": {"rope_parameters.full_attention.partial_rotary_factor": 0.5},
    # a field their rotary position code reads that the thinker's config class does not define (checkpoints set it),
    # and rotary sections halving the tiny 8-wide head
    **dict.fromkeys(
        ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker"),
        {"vision_start_token_id": 121, "text_config.rope_parameters.mrope_section": [1, 1, 2]},
    ),
    "superpoint": {"keypoint_decoder_dim": 65},  # a score per pixel of each 8 x 8 cell, and a dustbin
    # ... and the SuperPoint inside the keypoint matchers
    **dict.fromkeys(("superglue", "lightglue"), {"keypoint_detector_config.keypoint_decoder_dim": 65}),
    "shieldgemma2": {"yes_token_index": 10, "no_token_index": 11},  # its answer tokens, within the tiny vocabulary
    # multimodal rotary sections (temporal, height, width) halving the tiny 8-wide head: 1 + 1 + 2 = 4
    **dict.fromkeys(
        ("qwen2_5_omni_text", "qwen2_5_omni_talker", "hunyuan_vl_text"),
        {"rope_parameters.mrope_section": [1, 1, 2]},
    ),
    "hunyuan_vl": {"text_config.rope_parameters.mrope_section": [1, 1, 2]},
    "hgnet_v2": {"hidden_sizes": [128, 512, 1024, 2048]},  # the head reads the last stage, stage_out_channels wide
    # the stem feeds the first stage, as wide as it
    "textnet": {"stem_out_channels": 16},
    "lilt": {"hidden_size": 48},  # its layout embeddings are six of hidden_size // 6, concatenated
    "bros": {"dim_bbox_projection": 8},  # box embeddings per head: hidden_size // num_attention_heads
    # one audio channel (Dia's default 9 codebooks interleave the decoder's ids), no delay
    "dia": {"decoder_config.num_channels": 1, "delay_pattern": [0]},
    "gemma4_assistant": {"hidden_size_per_layer_input": 0},
    "t5": {"decoder_start_token_id": 0},  # as T5's checkpoints set it (the class default leaves it out)
    "deepseek_v2": {"num_experts_per_tok": 2},  # the class default leaves it None
    # the head's width is the last block's, set by width_coefficient (round_filters(1280) = 2560), not shrunk
    "efficientnet": {"hidden_dim": 2560},
    # its vision tower pools with hidden_size // 64 heads: at least 64 wide
    "bridgetower": {"vision_config.hidden_size": 64, "vision_config.num_attention_heads": 4},
    # per-layer kinds the class default leaves None (its checkpoints list them): one of each
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "deepseek_ocr2": {"text_config.mlp_layer_types": ["dense", "sparse"], "text_config.num_experts_per_tok": 2},
    # Mimi-style codecs: the upsampling convolution's groups must divide the tiny width
    "csm": {"codec_config.upsample_groups": 32},
    "pocket_tts_audio_tokenizer": {"upsample_groups": 32},
    # rotary over half the head: head_dim = qk_nope + qk_rope, as in the full-size config (64 + 64 = 128)
    "mistral4": {"head_dim": 16},
    # spatial embeddings: 4 coordinates and 2 shapes concatenated to the hidden width (4 * 4 + 2 * 8 = 32)
    "layoutlmv3": {"coordinate_size": 4, "shape_size": 8},
    "esm": {"pad_token_id": 1, "mask_token_id": 2},  # ESM's defaults leave them None; its embeddings need both
    # image codes then audio codes (codebook_size each) at the top of the text vocabulary, end to end
    "apertus1p5": {"text_config.vocab_size": 256, "image_token_offset": 160, "audio_token_offset": 192},
    # input, recurrent and output blocks, one layer each (a layer_types list holding "mlp" would halve them all)
    "dory": {
        "num_hidden_layers": 3,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "n_input_layers": 1,
        "n_recurrent_layers": 1,
        "n_output_layers": 1,
    },
    "efficientloftr": {"out_features": [16, 16, 32, 32]},  # the last stage is as wide as the model
    "fun_asr_nano": {"adaptor_config.intermediate_size": 8},  # a quarter of the text model's width
    # the layout derived from the full-size depth: the tiny model's one indexed-attention layer indexes for itself
    # (its keys and values are rounded to NVFP4 in blocks of 16: head_dim 16; indexer heads <= query heads per KV head)
    "kolibri1_1": {"index_layers": [1], "kv_source_layers": [0, 1], "head_dim": 16, "index_num_heads": 2},
    # windows tile the image: image_size / num_windows must divide by the windows per side (32 / 4 by 2)
    "lw_detr": {"backbone_config.num_windows": 4},
    "lw_detr_vit": {"num_windows": 4},
    # the class default has no rotary parameters per layer kind (its checkpoints do): multimodal rotary, head 8
    "cohere_compass_text": {"rope_parameters": _COMPASS_ROPE},
    "cohere_compass": {"text_config.rope_parameters": _COMPASS_ROPE},
    "rt_detr": _DETR_CHANNELS,
    "rt_detr_v2": _DETR_CHANNELS,
    "d_fine": _HGNET_DETR,
    "deimv2": _HGNET_DETR,
    "pp_doclayout_v2": _HGNET_DETR,
    "pp_doclayout_v4": _HGNET_DETR,
    "rf_detr": {"num_queries": 8},
    # the image embedding is the last EfficientNet stage, 320 channels x width_coefficient 2: text projects to it
    "align": {"projection_dim": 640},
    # its projection assumes as many mel bins as first-conv channels (128 at full size): 16, the sweep's mel bins
    "gemma4_audio": {"subsampling_conv_channels": [16, 32]},
    # per-layer attention overrides keyed by the full-size layer numbers dropped; the sliding-window layers' head is
    # qk_nope + qk_rope wide (8 + 8); the indexer's heads shrunk like the others
    "dots3_note_text": _DOTS3_TEXT,
    "dots3_note": {f"text_config.{k}": v for k, v in _DOTS3_TEXT.items()},
    # the indexed-attention layer's indexer, left unset by the class default: 2 heads of 8, 1 KV head, the top 2
    # of 4 compressed blocks (8 tokens, ratio 2)
    "qwen4_exp_text": _QWEN4_INDEXER,
    "qwen4_exp": {f"text_config.{k}": v for k, v in _QWEN4_INDEXER.items()},
    "xmod": {"default_language": "en_XX"},  # its adapters are per language: inputs without one name the default
    # local and LSH attention chunk the sequence (chunks shorter than its 8 tokens); in training the axial position
    # embeddings tile it exactly (2 x 4)
    "reformer": {**_REFORMER, "lsh_attn_chunk_length": 4},
    # a sliding window the class default leaves unset (its checkpoints set it), with as many heads as the others
    "step3p5": {"sliding_window": 4, "num_sliding_attention_heads": 4},
    "step3p7": {"text_config.sliding_window": 4, "text_config.num_sliding_attention_heads": 4},
    # no layer reads another's KV cache: the full-size count (15 of 35 layers) exceeds the tiny depth
    "gemma3n_text": {"num_kv_shared_layers": 0},
    # DPT-style necks read four backbone layers
    **{t: _FOUR_LAYER_BACKBONE for t in ("depth_anything", "prompt_depth_anything", "zoedepth", "tipsv2_dpt")},
}


def _is_prob(key: str) -> bool:
    if key in _ZERO_PROB or key.endswith(("pdrop", "_drop", "drop_rate")):  # gpt2's resid_pdrop, cvt's drop_rate
        return True
    return "dropout" in key or "drop_prob" in key or "drop_path" in key


def _shrink_width(key: str, value: int) -> int | None:
    if key in _HIDDEN:
        return HIDDEN
    if key in _INTERMEDIATE:
        return INTERMEDIATE
    if key in _SMALL_WIDTH:
        return _SMALL_WIDTH[key]
    if key.endswith(_WIDTH_SUFFIXES) and not any(w in key for w in _NOT_WIDTH) and value > 2 * HIDDEN:
        return HIDDEN
    return None


def _shrink_int(key: str, value: int, orig_heads: int | None) -> int:
    """The tiny value of one integer field (unchanged when the field is not a size)."""
    if key in _LAYERS:
        return min(value, LAYERS)
    if key in _HEADS:
        return min(value, HEADS)
    if key in _KV:  # keep multi-head (kv == heads) and multi-query (kv == 1) as they are
        return HEADS if orig_heads is not None and value == orig_heads else min(value, KV_HEADS)
    if key in _HEAD_DIM:
        return HEAD_DIM
    if key in _VOCAB:
        return min(value, VOCAB)
    if key in _POSITIONS:
        return min(value, POSITIONS)
    if key == "image_size":
        return min(value, IMAGE)
    if key == "patch_size":
        return min(value, PATCH)
    if key in _EXPERTS:
        return min(value, EXPERTS)
    if key in _TOPK:
        return min(value, 2)
    if key in _ONE:
        return _ONE[key]
    width = _shrink_width(key, value)
    return value if width is None else min(value, width)


def _kept_layers(d: dict[str, Any], layers: int | None) -> list[int] | None:
    """Which of the original layers the tiny model keeps: the first layer of every kind (the kind of layer i is the
    tuple of every per-layer string list at i: layer_types, mlp_layer_types, ...), then the next layers in order up to
    LAYERS. Keeping only the first LAYERS layers would turn a hybrid (three linear-attention layers, then one full
    attention) into a model without one of its kinds."""
    if layers is None or layers <= LAYERS:
        return None
    lists = [v for v in d.values() if isinstance(v, list) and len(v) == layers and all(isinstance(x, str) for x in v)]
    kinds = list(zip(*lists, strict=True)) if lists else [()] * layers
    kept = [i for i in range(layers) if kinds[i] not in kinds[:i]]
    kept += [i for i in range(layers) if i not in kept][: max(0, LAYERS - len(kept))]
    return sorted(kept)


def _shrink_list(key: str, value: list[Any], orig_layers: int | None, kept: list[int] | None) -> list[Any]:
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if ints and key == "depths":
        return [1] * len(value)
    if ints and key in _LIST_WIDTHS:
        return [16 * 2**i for i in range(len(value))]
    if ints and (key in _HEADS or key.endswith("heads")):
        return [min(v, 2) for v in value]
    if ints and key in ("conv_dim", "tdnn_dim"):
        return [HIDDEN] * len(value)
    if key == "image_size":
        return [min(v, IMAGE) for v in value]
    if key == "patch_size":
        return [min(v, PATCH) for v in value]
    if kept is not None and len(value) == orig_layers:
        return [value[i] for i in kept]  # per-layer lists (layer_types, ...) follow the kept layers
    return value


def _per_layer_dict(value: dict[Any, Any], orig_layers: int, kept: list[int]) -> dict[Any, Any] | None:
    """A dict keyed by layer index (gemma4's per_layer_config) renumbered to the kept layers; None if not one."""
    if not value or not all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in value):
        return None
    if not all(0 <= int(k) < orig_layers for k in value):
        return None
    return {type(k)(kept.index(int(k))): v for k, v in value.items() if int(k) in kept}


# Text models whose rotary embedding is split in three sections (time, height, width) by a default written in their
# modeling code for the full-size head (glm4v's [8, 12, 12] of 32), not in their configuration.
_MROPE_TYPES = {"glm4v_text", "glm4v_moe_text", "glm_image_text", "glm_ocr_text", "qwen2_vl_text", "qwen2_5_vl_text"}
_MROPE_TYPES |= {"paddleocr_vl_text", "ernie4_5_vl_moe_text", "cosmos3_edge_text", "cosmos3_edge"}


def _fix_rope(d: dict[str, Any]) -> None:
    """mrope_section splits the rotary half of head_dim in three: scaled to the tiny head."""
    rope = d.get("rope_parameters")
    if not isinstance(rope, dict):
        return
    section = rope.get("mrope_section")
    if (isinstance(section, list) and len(section) == 3) or d.get("model_type") in _MROPE_TYPES:
        rotary = int(int(d.get("head_dim") or HEAD_DIM) * float(rope.get("partial_rotary_factor", 1.0)))
        half = rotary // 2
        rope["mrope_section"] = [half // 4, half // 4, half - 2 * (half // 4)]


def _fill_none(d: dict[str, Any], out: dict[str, Any]) -> None:
    """Sizes a config leaves None for its model to derive, where the model reads the attribute as it is."""
    heads = next((out[k] for k in _HEADS if isinstance(out.get(k), int)), None)
    for key, value in d.items():
        if value is not None or heads is None:
            continue
        if key in _KV:
            out[key] = heads
        elif key == "head_dim":
            width = next((out[k] for k in _HIDDEN if isinstance(out.get(k), int)), HIDDEN)
            out[key] = width // heads
    for key in _VOCAB:
        if key in d and d[key] is None:
            out[key] = VOCAB


def _fix_backbone(out: dict[str, Any], kept: list[int] | None) -> None:
    """Backbone outputs named by stage index follow the shrunk depth (stage_names has one stage per kept layer)."""
    indices = out.get("out_indices")
    if kept is None or "depths" in out or not isinstance(indices, list):
        return
    n = len(kept)
    out["out_indices"] = sorted({min(i, n) if i >= 0 else i for i in indices if isinstance(i, int)})
    out["out_features"] = None


def shrink(d: dict[str, Any]) -> dict[str, Any]:
    """A tiny copy of a config's to_dict(): sizes shrunk by name, dropouts zeroed, sub-configs shrunk recursively."""
    heads = next((d[k] for k in _HEADS if isinstance(d.get(k), int)), None)
    layers = next((d[k] for k in _LAYERS if isinstance(d.get(k), int)), None)
    kept = _kept_layers(d, layers)
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict) and "model_type" in value:
            out[key] = shrink(value)
        elif isinstance(value, bool) or value is None:
            out[key] = value
        elif isinstance(value, int) and key in _LAYERS and kept is not None and value == layers:
            out[key] = len(kept)
        elif isinstance(value, int):
            out[key] = _shrink_int(key, value, heads)
        elif isinstance(value, float) and _is_prob(key):
            out[key] = 0.0
        elif isinstance(value, list) and value and all(isinstance(v, float) for v in value) and _is_prob(key):
            out[key] = [0.0] * len(value)  # per-stage rates (cvt's drop_path_rate, ...)
        elif isinstance(value, list):
            out[key] = _shrink_list(key, value, layers, kept)
        elif isinstance(value, dict) and "layer" in key and kept is not None and layers is not None:
            renumbered = _per_layer_dict(value, layers, kept)
            out[key] = value if renumbered is None else renumbered
        else:
            out[key] = value
    _fill_none(d, out)
    _fix_backbone(out, kept)
    _fix_rope(out)
    return out


def _special_ids(d: dict[str, Any], vocab: int) -> None:
    """Token ids past the tiny vocabulary move to its top (distinct ids from vocab - 1 down), recursively."""
    nxt = vocab - 1
    for key, value in d.items():
        if isinstance(value, dict) and "model_type" in value:
            _special_ids(value, int(value.get("vocab_size") or vocab))
        elif (key.endswith(("_token_id", "_token_index", "_id")) and isinstance(value, int)) and value >= vocab:
            d[key] = nxt
            nxt -= 1
        elif key.endswith("_token_id") and isinstance(value, list):
            d[key] = [v if not isinstance(v, int) or v < vocab else vocab - 1 for v in value]


def _apply(d: dict[str, Any], overrides: dict[str, Any]) -> None:
    for dotted, value in overrides.items():
        target = d
        *path, last = dotted.split(".")
        for p in path:
            target = target[p]
        target[last] = value


def tiny_config(model_type: str) -> Any:
    """The tiny PretrainedConfig of one model type."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    d = shrink(cls().to_dict())
    _special_ids(d, int(d.get("vocab_size") or VOCAB))
    _apply(d, OVERRIDES.get(model_type, {}))
    for k in ("_name_or_path", "transformers_version", "architectures"):
        d.pop(k, None)
    return cls.from_dict(d)
