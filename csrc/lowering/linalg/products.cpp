// Matrix products: mm, bmm, addmm, baddbmm, dot, mv, addmv — all one dot_general each.
#include "lowering/lib/host_kernels.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"  // reject_bool: PyTorch has no bool matrix products

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

// Reduced-precision products accumulate in float32 and are rounded once, after any bias term (PyTorch's opmath):
// the dot takes the operands as they are and produces float32 (preferred element type), the epilogue runs in float32.
ElementType acc_type(ElementType t) {
  return t == ElementType::kBF16 || t == ElementType::kF16 ? ElementType::kF32 : t;
}

Value matmul2d(OpContext& c, const Value& a, const Value& b, ElementType t) {
  if (host_kernel_fits(t, a.type.dims[0] * a.type.dims[1] * b.type.dims[1])) {
    return host_matmul(c.b, c.b.convert(a, t), c.b.convert(b, t), false, false);
  }
  return c.b.dot_general(c.b.convert(a, t), c.b.convert(b, t), {}, {}, {1}, {0},
                         {acc_type(t), {a.type.dims[0], b.type.dims[1]}});
}

// Batched: XLA-CPU's batched dot has no bf16 x bf16 -> f32 kernel ("Unsupported element type for DotThunk"), so
// half operands are widened first (exact: the products and their float32 sum are the same numbers).
Value batched(OpContext& c, const Value& a, const Value& b, ElementType t) {
  ElementType operand = acc_type(t);
  if (host_kernel_fits(t, a.type.dims[0] * a.type.dims[1] * a.type.dims[2] * b.type.dims[2])) {
    return host_matmul(c.b, c.b.convert(a, t), c.b.convert(b, t), false, false);
  }
  return c.b.dot_general(c.b.convert(c.b.convert(a, t), operand), c.b.convert(c.b.convert(b, t), operand), {0}, {0},
                         {2}, {1}, {acc_type(t), {a.type.dims[0], a.type.dims[1], b.type.dims[2]}});
}

// beta * self + alpha * product (args: self, m1, m2, beta, alpha), in the product's (accumulation) type.
Value scaled_add(OpContext& c, const Value& product) {
  TensorType o = c.out(0);
  ElementType t = product.type.dtype;
  // self must expand to the product's shape even when beta is 0 (PyTorch's expand check and wording).
  std::vector<int64_t> self_dims = c.arg(0).toTensor().sizes().vec();
  int64_t lead = o.rank() - static_cast<int64_t>(self_dims.size());
  TORCH_CHECK(lead >= 0, "The expanded size of the tensor must be at least the tensor's number of dimensions");
  for (size_t i = 0; i < self_dims.size(); ++i) {
    int64_t want = o.dims[lead + static_cast<int64_t>(i)];
    TORCH_CHECK(self_dims[i] == 1 || self_dims[i] == want, "The expanded size of the tensor (", want,
                ") must match the existing size (", self_dims[i], ") at non-singleton dimension ",
                lead + static_cast<int64_t>(i), ".  Target sizes: ", c10::IntArrayRef(o.dims),
                ".  Tensor sizes: ", c10::IntArrayRef(self_dims));
  }
  double beta = c.has(3) ? c.scalar(3) : 1.0, alpha = c.has(4) ? c.scalar(4) : 1.0;
  Value p = alpha == 1.0 ? product : c.b.binary("stablehlo.multiply", product, c.runtime_operand(4, t, o.dims));
  // addmm/addmv go to BLAS, where alpha 0 ignores the product (even inf/NaN in it); baddbmm's loop does not.
  bool blas = c.op_name().rfind("addmm", 0) == 0 || c.op_name().rfind("addmv", 0) == 0 ||
              c.op_name().rfind("addbmm", 0) == 0;
  if (alpha == 0.0 && blas) p = c.b.constant(0, t, o.dims);
  if (beta == 0.0) return c.b.convert(p, o.dtype);  // PyTorch ignores self (even NaN) when beta is 0
  Value s = c.operand(0, t, o.dims);
  if (beta != 1.0) s = c.b.binary("stablehlo.multiply", s, c.runtime_operand(3, t, o.dims));
  return c.b.convert(c.b.binary("stablehlo.add", s, p), o.dtype);
}

Value rounded(OpContext& c, const Value& v) { return c.b.convert(v, c.out(0).dtype); }

V mm_rule(OpContext& c) {
  reject_bool(c, "mm");
  return {rounded(c, matmul2d(c, c.tensor(0), c.tensor(1), c.out(0).dtype))};
}
V bmm_rule(OpContext& c) {
  reject_bool(c, "bmm");
  return {rounded(c, batched(c, c.tensor(0), c.tensor(1), c.out(0).dtype))};
}
V addmm_rule(OpContext& c) {
  reject_bool(c, "addmm");
  return {scaled_add(c, matmul2d(c, c.tensor(1), c.tensor(2), c.out(0).dtype))};
}
V baddbmm_rule(OpContext& c) {
  reject_bool(c, "baddbmm");
  return {scaled_add(c, batched(c, c.tensor(1), c.tensor(2), c.out(0).dtype))};
}

Value vector_product(OpContext& c, size_t lhs, size_t rhs, const std::vector<int64_t>& contract_lhs,
                     const std::vector<int64_t>& result_dims) {
  ElementType t = c.out(0).dtype;
  return c.b.dot_general(c.b.convert(c.tensor(lhs), t), c.b.convert(c.tensor(rhs), t), {}, {}, contract_lhs, {0},
                         {acc_type(t), result_dims});
}

// addbmm(self, batch1, batch2, beta, alpha): the batch is contracted along with k (one dot, one rounding).
V addbmm_rule(OpContext& c) {
  reject_bool(c, "addbmm");
  ElementType t = c.out(0).dtype;
  Value a = c.tensor(1), b = c.tensor(2);
  Value p = c.b.dot_general(c.b.convert(a, t), c.b.convert(b, t), {}, {}, {0, 2}, {0, 1},
                            {acc_type(t), {a.type.dims[1], b.type.dims[2]}});
  return {scaled_add(c, p)};
}

// addr(self, vec1, vec2, beta, alpha): beta * self + alpha * outer(vec1, vec2) in float32 for float16/bfloat16,
// rounded once as the CPU kernel does; bool is the logical form (beta && self) || (alpha && vec1 && vec2).
V addr_rule(OpContext& c) {
  TensorType o = c.out(0);
  bool logical = o.dtype == ElementType::kPred;
  ElementType t = logical ? ElementType::kF32 : acc_type(o.dtype);
  Value outer = c.b.binary("stablehlo.multiply", c.b.broadcast_in_dim(c.b.convert(c.tensor(1), t), o.dims, {0}),
                           c.b.broadcast_in_dim(c.b.convert(c.tensor(2), t), o.dims, {1}));
  double beta = c.has(3) ? c.scalar(3) : 1.0, alpha = c.has(4) ? c.scalar(4) : 1.0;
  if (alpha != 1.0) outer = c.b.binary("stablehlo.multiply", outer, c.runtime_operand(4, t, o.dims));
  Value r = outer;
  if (beta != 0.0) {
    Value s = c.operand(0, t, o.dims);
    if (beta != 1.0) s = c.b.binary("stablehlo.multiply", s, c.runtime_operand(3, t, o.dims));
    r = c.b.binary("stablehlo.add", s, outer);
  }
  if (logical) return {c.b.compare(CompareDirection::kNe, r, c.b.constant(0, t, o.dims))};
  return {c.b.convert(r, o.dtype)};
}

V dot_rule(OpContext& c) {
  reject_bool(c, "dot");
  return {rounded(c, vector_product(c, 0, 1, {0}, {}))};
}

// vdot(self, other): the dot product with self conjugated (a plain dot for real types).
V vdot_rule(OpContext& c) {
  reject_bool(c, "vdot");
  ElementType t = c.out(0).dtype;
  Value a = c.b.convert(c.tensor(0), t);
  if (is_complex(t)) {
    TensorType rt{t == ElementType::kC128 ? ElementType::kF64 : ElementType::kF32, a.type.dims};
    Value im = c.b.unary("stablehlo.negate", c.b.op1("stablehlo.imag", {a}, rt));
    a = c.b.op1("stablehlo.complex", {c.b.op1("stablehlo.real", {a}, rt), im}, a.type);
  }
  return {rounded(c, c.b.dot_general(a, c.b.convert(c.tensor(1), t), {}, {}, {0}, {0}, {acc_type(t), {}}))};
}

V mv_rule(OpContext& c) {
  reject_bool(c, "mv");
  return {rounded(c, vector_product(c, 0, 1, {1}, {c.arg(0).toTensor().size(0)}))};
}

V addmv_rule(OpContext& c) {
  reject_bool(c, "addmv");
  return {scaled_add(c, vector_product(c, 1, 2, {1}, {c.arg(1).toTensor().size(0)}))};
}

// CPU's dtype checks of the matrix products, which PyTorch's meta kernels leave out (torch.mm(float, long) would
// otherwise compute in float). Checked before recording, on every call.
at::ScalarType dtype_at(const std::vector<c10::IValue>& args, size_t i) { return args.at(i).toTensor().scalar_type(); }
std::string c_name(at::ScalarType t) { return std::string(c10::scalarTypeToTypeMeta(t).name()); }

void check_mm(std::vector<c10::IValue>& args) {
  at::ScalarType m1 = dtype_at(args, 0), m2 = dtype_at(args, 1);
  TORCH_CHECK(m1 == m2, "expected m1 and m2 to have the same dtype, but got: ", c_name(m1), " != ", c_name(m2));
}
void check_addmm(std::vector<c10::IValue>& args) {
  at::ScalarType self = dtype_at(args, 0), m1 = dtype_at(args, 1), m2 = dtype_at(args, 2);
  TORCH_CHECK(self == m2, "self and mat2 must have the same dtype, but got ", self, " and ", m2);
  TORCH_CHECK(m1 == m2, "mat1 and mat2 must have the same dtype, but got ", m1, " and ", m2);
}
void check_mv(std::vector<c10::IValue>& args) {
  at::ScalarType mat = dtype_at(args, 0), vec = dtype_at(args, 1);
  TORCH_CHECK(mat == vec, "addmv input tensors must have the same dtype, but got ", vec, ", ", mat, ", and ", vec);
}

}  // namespace

void add_linalg_rules(Rows& rows) {
  rows.push_back({{"mm", "mm.out"}, mm_rule, check_mm});
  rows.push_back({{"bmm", "bmm.out"}, bmm_rule});
  rows.push_back({{"addmm", "addmm_", "addmm.out"}, addmm_rule, check_addmm});
  rows.push_back({{"baddbmm", "baddbmm_", "baddbmm.out"}, baddbmm_rule});
  rows.push_back({{"dot", "dot.out"}, dot_rule});
  rows.push_back({{"mv", "mv.out"}, mv_rule, check_mv});
  rows.push_back({{"vdot", "vdot.out"}, vdot_rule});
  rows.push_back({{"addbmm", "addbmm_", "addbmm.out"}, addbmm_rule});
  rows.push_back({{"addr", "addr_", "addr.out"}, addr_rule});
  rows.push_back({{"addmv", "addmv_", "addmv.out"}, addmv_rule});
}

bool host_kernel_fits(ElementType t, int64_t macs) {
  return host_kernels() && macs >= host_kernel_min_macs() && (t == ElementType::kF32 || t == ElementType::kF64);
}

Value host_matmul(HloBuilder& b, Value x, Value y, bool transpose_x, bool transpose_y) {
  int64_t rank = x.type.rank();
  std::vector<int64_t> swap_last(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) swap_last[i] = i;
  std::swap(swap_last[rank - 1], swap_last[rank - 2]);
  auto read_in_place = [&](Value& v, bool& transposed) {
    const HloBuilder::Transposed* t = b.transposed(v);
    if (t == nullptr || t->permutation != swap_last) return;
    v = t->source;
    transposed = !transposed;
  };
  read_in_place(x, transpose_x);
  read_in_place(y, transpose_y);
  auto rows = [](const Value& v, bool t) { return v.type.dims[v.type.rank() - (t ? 1 : 2)]; };
  auto cols = [](const Value& v, bool t) { return v.type.dims[v.type.rank() - (t ? 2 : 1)]; };
  std::vector<int64_t> dims(x.type.dims.begin(), x.type.dims.end() - 2);
  dims.push_back(rows(x, transpose_x));
  dims.push_back(cols(y, transpose_y));
  if (rank > 3) {  // the handler takes one batch dim: merge the leading ones (free: row-major reshapes)
    int64_t batch = 1;
    for (int64_t i = 0; i + 2 < rank; ++i) batch *= x.type.dims[i];
    auto merged = [&](const Value& v) {
      return b.reshape(v, {batch, v.type.dims[rank - 2], v.type.dims[rank - 1]});
    };
    x = merged(x);
    y = merged(y);
  }
  std::vector<int64_t> out_dims = dims;
  if (rank > 3) out_dims = {x.type.dims[0], dims[dims.size() - 2], dims.back()};
  std::string target = std::string("torch_tpu.gemm_") + (transpose_x ? "t" : "n") + (transpose_y ? "t" : "n");
  Value r = b.custom_call(target, {x, y}, {x.type.dtype, out_dims});
  return rank > 3 ? b.reshape(r, dims) : r;
}

}  // namespace torch_tpu
