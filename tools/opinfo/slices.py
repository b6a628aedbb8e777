"""Named subsets of op_db for `--slice` (full entry names: name or name.variant)."""

from __future__ import annotations

# The CI slice (tests/ops/test_opinfo_floor.py): cheap entries that span unary, binary, reductions, nn, indexing,
# shape/view ops and linalg, a few known fallbacks and known wrong answers included so the floor tracks them.
CI: tuple[str, ...] = (
    # unary / activations
    "abs", "neg", "exp", "log", "sin", "sigmoid", "sqrt", "rsqrt", "erf", "reciprocal",
    "nn.functional.gelu", "nn.functional.relu", "nn.functional.silu", "nn.functional.softplus", "nn.functional.elu",
    # binary / ternary
    "add", "sub", "mul", "div.no_rounding_mode", "maximum", "where", "eq", "lerp", "max.binary",
    # reductions and scans
    "sum", "mean", "amax", "var", "max.reduction_with_dim", "argmax", "cumsum", "logsumexp", "all",
    # nn
    "nn.functional.linear", "nn.functional.conv2d", "nn.functional.layer_norm", "nn.functional.batch_norm",
    "softmax", "nn.functional.cross_entropy", "nn.functional.mse_loss", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.embedding", "nn.functional.group_norm",
    # indexing
    "index_select", "gather", "scatter_add", "index_add", "masked_fill", "index_put", "__getitem__", "masked_select",
    # shape and views
    "cat", "transpose", "permute", "reshape", "squeeze", "unsqueeze", "flatten", "split", "repeat", "flip", "tril",
    # linalg
    "matmul", "mm", "bmm", "addmm", "linalg.vector_norm", "einsum", "outer", "linalg.det",
)  # fmt: skip

SLICES: dict[str, tuple[str, ...]] = {"ci": CI}
