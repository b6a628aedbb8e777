"""StableHLO module text from elsewhere (a JAX lowering, an exported program) made ready to be called from another
module: its functions renamed apart and made private, and the element types of torch dtypes."""

from __future__ import annotations

import hashlib
import re

import torch

_FUNC = re.compile(r"func\.func\s+(?:public\s+|private\s+)?@([A-Za-z_][\w$.]*)\s*\(")

ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "ui8",
    torch.uint16: "ui16",
    torch.uint32: "ui32",
    torch.uint64: "ui64",
    torch.bool: "i1",
    torch.complex64: "complex<f32>",
    torch.complex128: "complex<f64>",
    torch.float8_e5m2: "f8E5M2",
    torch.float8_e4m3fn: "f8E4M3FN",
    torch.float8_e5m2fnuz: "f8E5M2FNUZ",
    torch.float8_e4m3fnuz: "f8E4M3FNUZ",
}


def tensor_type(sizes: list[int] | tuple[int, ...] | torch.Size, dtype: torch.dtype) -> str:
    """`tensor<2x3xf32>` (`tensor<f32>` for a scalar)."""
    if dtype not in ELEMENT_TYPES:
        raise TypeError(f"no StableHLO element type for {dtype}")
    return "tensor<" + "".join(f"{int(d)}x" for d in sizes) + ELEMENT_TYPES[dtype] + ">"


def renamed_apart(text: str, tag: str) -> tuple[str, str]:
    """The func.func definitions of a module's text with every symbol prefixed (unique to `text`: a digest of it)
    and made private, and the new name of @main."""
    start = text.find("module")
    header_end = text.find("\n", start)
    end = text.rfind("}")
    if start < 0 or header_end < 0 or end <= header_end:
        raise RuntimeError(f"{tag}: not an MLIR module:\n{text[:300]}")
    body = text[header_end + 1 : end]  # after `module @x attributes {...} {`, before its closing brace
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    prefix = re.sub(r"\W", "_", tag) + "_" + digest + "_"
    for name in sorted(set(_FUNC.findall(body)), key=len, reverse=True):
        body = re.sub(r"@" + re.escape(name) + r"(?![\w$.])", "@" + prefix + name, body)
    body = re.sub(r"func\.func\s+(?:public\s+)?@", "func.func private @", body)
    return prefix + "main", body
