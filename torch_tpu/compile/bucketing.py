"""Bounded dynamism: graphs compiled with dynamic sizes (``mark_dynamic`` / ``dynamic=True``) run with each size
padded to a bucket (32, 64, 128, 256, 512, then powers of two), so sequence lengths 2..512 use at most 5 programs;
length 1 is specialized by Dynamo (a graph and program of its own), 6 in all for 1..512. Every dynamic size is
analysed on its own (below) and padded where that is safe; a small dynamic batch is padded too (2 -> 32), which costs
compute: mark only the sequence dim dynamic (``torch._dynamo.mark_dynamic(x, 1)``) to avoid that.

Padding changes results unless every element at a position < L is computed only from inputs at positions < L.
`analyse` proves that from the ATen inference graph, or refuses (the graph then runs unpadded: one program per
length). Each tensor that carries `s` is tracked as a logical ``[P, s, S]`` array (P outer blocks, S inner
elements); an op is accepted only if it keeps positions along `s` independent:

- pointwise ops (broadcasting included), views/reshapes that keep the ``[P, s, S]`` split, permutes, unsqueeze,
  slices and selects along other dims, a prefix slice ``[0:s]`` of a larger static dim (up to its size);
- matmuls (mm/addmm/bmm) whose contracted dim does not carry `s`; embedding/index_select gathers by an index
  tensor that carries `s`;
- reductions, softmax, layer norm over dims that do not carry `s`;
- factories (full/zeros/ones/empty/arange) whose sizes mention `s`.

Anything else touching `s` (a reduction or contraction over it, e.g. attention scores ``[s, s]`` or a mean loss
over tokens, a size used as a value such as ``x / s``, a tensor with `s` in two dims) refuses. Accepted graphs pad
their tensor inputs with zeros on the host (a download, pad, upload: no program whose text depends on L) and
return outputs as views ``[..., :L, ...]`` of the padded results. Only inference graphs (no autograd) are padded: a
training graph pair (forward + backward) with dynamic sizes runs unpadded, one program per shape.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.nn.functional as F

from torch_tpu.compile import counters
from torch_tpu.compile.options import StepLadder

BUCKETS: tuple[int, ...] = (32, 64, 128, 256, 512)
last_refusal = ""  # why the last graph analysed runs unpadded (for debugging and tests)

aten = torch.ops.aten


def bucket_for(length: int) -> int:
    """The padded size for `length`: the first bucket that holds it, else the next power of two."""
    for b in BUCKETS:
        if length <= b:
            return b
    return 1 << (length - 1).bit_length()


class _Refuse(Exception):
    pass


@dataclass(frozen=True)
class _Layout:
    dim: int  # the dim that carries s
    coeff: sympy.Expr  # that dim's size is coeff * s
    outer: sympy.Expr  # P (other dynamic sizes may appear in it)
    inner: sympy.Expr  # S


def _expr(d: Any) -> sympy.Expr:
    return d.node.expr if isinstance(d, torch.SymInt) else sympy.Integer(int(d))


def _shape(t: torch.Tensor) -> list[sympy.Expr]:
    return [_expr(d) for d in t.shape]


def _exact_div(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """a / b when b divides a as a polynomial in the sizes, else refuse."""
    q = sympy.cancel(a / b)
    _, den = sympy.fraction(q)
    if den != 1 or (q.is_number and not (q.is_Integer and int(q) > 0)):
        raise _Refuse(f"{a} is not a multiple of {b}")
    return q


class _Analysis:
    def __init__(self, symbol: sympy.Symbol) -> None:
        self.s = symbol
        self.max_bucket = math.inf

    # ---- shapes ----------------------------------------------------------------------------------------------
    def carries(self, x: Any) -> bool:
        if isinstance(x, torch.SymInt):
            return self.s in x.node.expr.free_symbols
        if isinstance(x, torch.Tensor):
            return any(self.s in _expr(d).free_symbols for d in x.shape)
        return False

    def layout(self, t: torch.Tensor) -> _Layout | None:
        """The natural layout of a tensor (the s-dim's coefficient split as P takes it all: callers check)."""
        dims = [_expr(d) for d in t.shape]
        hits = [i for i, e in enumerate(dims) if self.s in e.free_symbols]
        if not hits:
            return None
        if len(hits) > 1:
            raise _Refuse("s in two dims")
        i = hits[0]
        coeff = _exact_div(dims[i], self.s)
        if self.s in coeff.free_symbols:
            raise _Refuse(f"dim {dims[i]} is not linear in s")
        rest = [e for j, e in enumerate(dims) if j != i]
        return _Layout(i, coeff, sympy.Mul(*rest[:i]), sympy.Mul(*rest[i:]))

    def natural(self, t: torch.Tensor) -> _Layout | None:
        lay = self.layout(t)
        if lay is not None and lay.coeff != 1:
            raise _Refuse("merged s-dim without a known split")
        return lay


def _val(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else n


_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default}
_SAME_SHAPE = {aten.clone.default, aten._to_copy.default, aten.alias.default, aten.detach.default}
_REDUCTIONS = {
    aten.sum.dim_IntList,
    aten.mean.dim,
    aten.amax.default,
    aten.amin.default,
    aten._softmax.default,
    aten._log_softmax.default,
    aten.var.correction,
    aten.var_mean.correction,
    aten.argmax.default,
    aten.max.dim,
    aten.prod.dim_int,
    aten.cumsum.default,
    aten.logsumexp.default,
}
_FACTORIES = {
    aten.full.default,
    aten.zeros.default,
    aten.ones.default,
    aten.empty.memory_format,
    aten.arange.default,
    aten.arange.start,
    aten.arange.start_step,
    aten.new_zeros.default,
    aten.new_ones.default,
    aten.new_empty.default,
    aten.new_full.default,
    aten.expand.default,
    aten.full_like.default,
    aten.zeros_like.default,
    aten.ones_like.default,
    aten.empty_like.default,
}
_SYM_OPS = {operator.mul, operator.add, operator.floordiv, aten.sym_size.int}
_SYM_NUMBERS = (torch.SymInt, torch.SymFloat, torch.SymBool)
# The factory arguments that only shape the result. Any other argument that reads s (a fill value, an arange's start
# or step) puts the padded length into values at positions < L: `full_like(x, x.shape[0])` would hold the bucket.
# arange's end only decides how many of 0, 1, 2, ... there are, so it may carry s when start and step do not.
_SHAPE_ARGUMENTS = {"size", "self", "end"}


def _factory_value_reads_s(a: _Analysis, target: torch._ops.OpOverload, node: torch.fx.Node) -> bool:
    names = [arg.name for arg in target._schema.arguments]
    bound = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
    for name, value in bound.items():
        if name in _SHAPE_ARGUMENTS:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(a.carries(_val(v)) for v in values):
            return True
    return False


def _check_node(a: _Analysis, node: torch.fx.Node, lay: dict[torch.fx.Node, Any]) -> None:
    out = node.meta.get("val")
    target = node.target
    args = list(torch.fx.node.map_aggregate(node.args, _val))
    tensor_in = [(x, _val(x)) for x in node.all_input_nodes if isinstance(_val(x), torch.Tensor)]
    touches = a.carries(out) if not isinstance(out, (tuple, list)) else any(a.carries(o) for o in out)
    touches = touches or any(a.carries(_val(x)) for x in node.all_input_nodes)
    if not touches:
        return
    if target in _SYM_OPS or isinstance(out, torch.SymInt):
        return  # a size computed from s: checked where it is used (only shape arguments accept it)

    def uses_size_as_value() -> bool:
        return any(a.carries(_val(x)) for x in node.all_input_nodes if isinstance(_val(x), _SYM_NUMBERS))

    if target is operator.getitem:
        return  # the element of a tuple output, checked with its producer
    if not isinstance(target, torch._ops.OpOverload):
        raise _Refuse(f"{target}")
    if uses_size_as_value() and target not in _VIEWS | _FACTORIES | {aten.slice.Tensor}:
        raise _Refuse(f"{target} uses a size of s as a value")

    def in_layout(n: torch.fx.Node) -> _Layout | None:
        return lay.get(n) if n in lay else a.natural(_val(n))

    if target in _FACTORIES:
        if _factory_value_reads_s(a, target, node):
            raise _Refuse(f"{target} computes its values from a size of s")
        if target in (aten.expand.default,):
            src = in_layout(node.args[0])
            if src is not None and src.coeff != 1:
                raise _Refuse("expand of merged s-dim")
        lay[node] = a.natural(out)
        return
    if target in _VIEWS:
        src = in_layout(node.args[0])
        o = a.layout(out)
        if src is None or o is None:
            raise _Refuse("view creates or drops s")
        dims = [_expr(d) for d in out.shape]
        before = sympy.Mul(*dims[: o.dim])
        after = sympy.Mul(*dims[o.dim + 1 :])
        if sympy.expand(_exact_div(src.outer, before) * _exact_div(src.inner, after) - o.coeff) != 0:
            raise _Refuse("view mixes s with other dims")
        lay[node] = _Layout(o.dim, o.coeff, src.outer, src.inner)
        return
    if target in _SAME_SHAPE:
        lay[node] = in_layout(node.args[0])
        return
    if torch.Tag.pointwise in target.tags:
        o = a.layout(out)
        if o is None:
            raise _Refuse("pointwise drops s")
        rank = out.dim()
        for n, v in tensor_in:
            lv = in_layout(n)
            if lv is None:
                continue
            if _shape(v) == _shape(out):
                o = lv
                continue
            if lv.coeff != 1 or lv.dim + rank - v.dim() != o.dim:
                raise _Refuse("pointwise broadcast moves s")
        if o.coeff != 1 and not any(_shape(v) == _shape(out) for _, v in tensor_in):
            raise _Refuse("pointwise merged s")
        lay[node] = o
        return
    if target in (aten.permute.default, aten.transpose.int, aten.t.default, aten.unsqueeze.default):
        in_layout(node.args[0]) and a.natural(args[0])
        lay[node] = a.natural(out)
        return
    if target in (aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.select.int):
        src = a.natural(args[0])
        o = a.natural(out)
        if target is aten.select.int and src is not None and args[1] % args[0].dim() == src.dim:
            raise _Refuse("select along s")
        if src is None or o is None:
            raise _Refuse("squeeze drops s")
        lay[node] = o
        return
    if target is aten.slice.Tensor:
        src = a.layout(args[0])
        dim = (args[1] if len(args) > 1 else 0) % args[0].dim()
        start = args[2] if len(args) > 2 else 0
        end = args[3] if len(args) > 3 else None
        step = args[4] if len(args) > 4 else 1
        if src is None:  # x[:s] of a static dim: valid while the bucket fits in that dim
            if start not in (0, None) or step != 1 or not a.carries(end) or _expr(end) != a.s:
                raise _Refuse("slice with s")
            if isinstance(args[0].shape[dim], torch.SymInt):
                raise _Refuse("slice of a dynamic dim")
            a.max_bucket = min(a.max_bucket, int(args[0].shape[dim]))
        elif dim == src.dim:
            if src.coeff != 1 or start not in (0, None) or step != 1:
                raise _Refuse("slice along s")
            if not (end is None or (a.carries(end) and _expr(end) == a.s) or (isinstance(end, int) and end >= 2**62)):
                raise _Refuse("slice along s")
        elif src.coeff != 1:
            raise _Refuse("slice of merged s")
        lay[node] = a.natural(out)
        return
    if target in (aten.split.Tensor, aten.split_with_sizes.default):
        src = a.natural(args[0])
        dim = (args[2] if len(args) > 2 else 0) % args[0].dim()
        if src is not None and dim == src.dim:
            raise _Refuse("split along s")
        for o in out:
            a.natural(o)
        return
    if target in (aten.embedding.default, aten.index_select.default):
        weight, index = (args[0], args[1]) if target is aten.embedding.default else (args[0], args[2])
        if a.carries(weight) or (target is aten.index_select.default and args[1] != 0):
            raise _Refuse("gather from s")
        a.natural(index)
        lay[node] = a.natural(out)
        return
    if target is aten.index.Tensor:  # weight[ids]: a gather by an index tensor that carries s
        indices = [i for i in args[1] if i is not None]
        if a.carries(args[0]) or len(args[1]) != 1 or len(indices) != 1:
            raise _Refuse("index with s")
        a.natural(indices[0])
        lay[node] = a.natural(out)
        return
    if target in (aten.mm.default, aten.addmm.default, aten.bmm.default):
        x, w = (args[1], args[2]) if target is aten.addmm.default else (args[0], args[1])
        if target is aten.addmm.default and a.carries(args[0]):
            raise _Refuse("addmm bias with s")
        if a.carries(w) or any(a.s in _expr(d).free_symbols for d in x.shape[-1:]):
            raise _Refuse("contraction over s")
        xn = x if not isinstance(x, torch.Tensor) else x
        src = in_layout(node.args[1] if target is aten.addmm.default else node.args[0])
        k = _expr(xn.shape[-1])
        n_out = _expr(out.shape[-1])
        if src is None:
            raise _Refuse("matmul layout")
        o = a.layout(out)
        if o is None:
            raise _Refuse("matmul drops s")
        lay[node] = _Layout(o.dim, o.coeff, src.outer, _exact_div(src.inner, k) * n_out)
        return
    if target in _REDUCTIONS or target is aten.native_layer_norm.default:
        src = a.natural(args[0])
        rank = args[0].dim()
        if target is aten.native_layer_norm.default:
            dims = list(range(rank - len(args[1]), rank))
        elif target in (aten._softmax.default, aten._log_softmax.default, aten.cumsum.default, aten.max.dim):
            dims = [args[1]]
        elif target is aten.argmax.default:
            dims = [args[1]] if len(args) > 1 and args[1] is not None else list(range(rank))
        elif target in (aten.var.correction, aten.var_mean.correction):
            dims = list(args[1]) if len(args) > 1 and args[1] is not None else list(range(rank))
        else:
            dims = list(args[1]) if len(args) > 1 and args[1] not in (None, []) else list(range(rank))
        if src is not None and src.dim in [d % rank for d in dims]:
            raise _Refuse(f"{target} over s")
        outs = out if isinstance(out, (tuple, list)) else [out]
        for o in outs:
            if isinstance(o, torch.Tensor):
                a.natural(o)
        lay[node] = a.natural(outs[0]) if isinstance(outs[0], torch.Tensor) else None
        return
    raise _Refuse(f"{target} is not known to keep positions along s independent")


@dataclass
class _Plan:
    size_args: list[int]  # placeholder positions holding the dynamic size itself
    tensor_dims: dict[int, int]  # placeholder position -> dim carrying it
    output_dims: list[int | None]  # per output: dim carrying it (sliced back to the length), or None
    max_bucket: float  # larger buckets would overrun a static dim sliced to the size

    def length(self, args: Sequence[Any]) -> int:
        if self.size_args:
            return int(args[self.size_args[0]])
        i, d = next(iter(self.tensor_dims.items()))
        return int(args[i].shape[d])


def _symbols(gm: torch.fx.GraphModule) -> set[sympy.Symbol]:
    symbols: set[sympy.Symbol] = set()
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("val")
        if isinstance(v, torch.SymInt):
            symbols |= v.node.expr.free_symbols
        elif isinstance(v, torch.Tensor):
            for d in v.shape:
                symbols |= _expr(d).free_symbols
    return symbols


def analyse(gm: torch.fx.GraphModule, symbol: sympy.Symbol) -> _Plan | None:
    """A padding plan for dynamic size `symbol` of `gm`, or None when padding it is not provably safe."""
    global last_refusal
    a = _Analysis(symbol)
    lay: dict[torch.fx.Node, Any] = {}
    plan = _Plan([], {}, [], math.inf)
    node: Any = None
    try:
        for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
            v = node.meta.get("val")
            if isinstance(v, torch.SymInt) and a.carries(v):
                if v.node.expr != a.s:
                    raise _Refuse("an input size is an expression of s")
                plan.size_args.append(i)
            elif isinstance(v, torch.Tensor):
                lo = a.natural(v)
                if lo is not None:
                    if not v.is_contiguous():
                        raise _Refuse("strided input")
                    plan.tensor_dims[i] = lo.dim
                    lay[node] = lo
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                for o in node.args[0]:
                    v = _val(o)
                    if isinstance(v, torch.SymInt) and a.carries(v):
                        raise _Refuse("a size of s is an output")
                    lo = a.natural(v) if isinstance(v, torch.Tensor) else None
                    plan.output_dims.append(lo.dim if lo is not None else None)
                continue
            if node.op != "call_function":
                raise _Refuse(f"{node.op} node")
            _check_node(a, node, lay)
    except Exception as e:  # noqa: BLE001 - anything unexpected refuses: running unpadded is always correct
        last_refusal = f"{symbol}: {node.format_node() if node is not None else ''}: {e}"
        return None
    plan.max_bucket = a.max_bucket
    return plan if plan.size_args or plan.tensor_dims else None


def _pad(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """`t` zero-padded along `dim` to `size`, staged through the host so no program depends on t's length."""
    host = t.detach().cpu()
    pad = [0, 0] * (t.dim() - 1 - dim) + [0, size - t.shape[dim]]
    return F.pad(host, pad).to(t.device)


def _upper_bound(gm: torch.fx.GraphModule, symbol: sympy.Symbol) -> int | None:
    """The largest value `symbol` may take (mark_dynamic's max / upper_bound), when one was given."""
    for n in gm.graph.nodes:
        v = n.meta.get("val") if n.op == "placeholder" else None
        sizes = [v] if isinstance(v, torch.SymInt) else list(v.shape) if isinstance(v, torch.Tensor) else []
        for d in sizes:
            if isinstance(d, torch.SymInt) and symbol in _expr(d).free_symbols:
                upper = d.node.shape_env.var_to_range[symbol].upper
                if not isinstance(upper, (int, sympy.Integer)):  # unbounded: int_oo
                    return None
                value = int(upper)
                return value if value < 1 << 62 else None
    return None


def _capped(sizer: Callable[[int], int], bound: int | None) -> Callable[[int], int]:
    """Buckets never beyond the bound: the largest program is the bound's size."""
    if bound is None:
        return sizer
    return lambda length: min(sizer(length), max(bound, length))


def try_bucketed(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], ladder: tuple[int, int] | None = None
) -> Callable[..., Any] | None:
    """A callable that runs `gm` with its dynamic sizes padded to buckets (those sizes for which padding is provably
    safe), or None when there is none: the graph then runs unpadded, one program per shape. `ladder` (number of
    buckets, step) picks TorchTPU's buckets (`StepLadder`, one per dynamic size) instead of `bucket_for`."""
    symbols = sorted(_symbols(gm), key=str)
    analysed = [(sym, analyse(gm, sym)) for sym in symbols]
    plans = [p for _, p in analysed if p is not None]
    if not plans:
        return None
    bounds = [_upper_bound(gm, sym) for sym, p in analysed if p is not None]
    sizers: list[Callable[[int], int]] = [
        _capped(StepLadder(*ladder) if ladder else bucket_for, bound) for bound in bounds
    ]

    def forward(*args: Any) -> Any:
        return gm.forward(*args)  # looked up per call: the backend rewrites the graph after this analysis

    def call(*args: Any) -> Any:
        padded = list(args)
        cuts: list[tuple[_Plan, int]] = []
        for plan, sizer in zip(plans, sizers, strict=True):
            length = plan.length(args)
            size = sizer(length)
            if size == length or size > plan.max_bucket:
                continue
            for i in plan.size_args:
                padded[i] = size
            for i, d in plan.tensor_dims.items():
                padded[i] = _pad(padded[i], d, size)
            cuts.append((plan, length))
        if not cuts:
            return forward(*args)
        counters.bump("bucketed_calls")
        outs = list(forward(*padded))
        for plan, length in cuts:
            for k, d in enumerate(plan.output_dims):
                if d is not None:
                    outs[k] = outs[k].narrow(d, 0, length)
        return outs

    return call
