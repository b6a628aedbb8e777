// FFTs: _fft_r2c, _fft_c2r, _fft_c2c (what every torch.fft function reduces to) as stablehlo.fft.
// stablehlo.fft transforms the trailing 1-3 dimensions, so the requested dims are moved to the end (at most three at a
// time: a multi-dimensional DFT is separable), transformed and moved back. XLA's inverse transforms already divide by
// the signal size; PyTorch's `normalization` (0: none, 1: 1/sqrt(n), 2: 1/n, applied in the direction asked) is
// restored with one multiply by a constant.
#include <algorithm>
#include <cmath>

#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;

ElementType complex_of(ElementType t) { return t == ElementType::kF64 ? ElementType::kC128 : ElementType::kC64; }
ElementType real_of(ElementType t) { return t == ElementType::kC128 ? ElementType::kF64 : ElementType::kF32; }

std::vector<int64_t> fft_dims(OpContext& c, size_t i, int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d : c.ints(i)) dims.push_back(normalize_dim(d, rank));
  return dims;
}

// Applies stablehlo.fft of `kind` over `group` (1-3 dims of x, the last of which is the one RFFT/IRFFT halve), with
// `lengths` the signal sizes of those dims; `out_last` is the size of the last group dim in the result.
Value fft_over(HloBuilder& b, const Value& x, const std::vector<int64_t>& group, const std::vector<int64_t>& lengths,
               const char* kind, ElementType out_dtype, int64_t out_last) {
  int64_t rank = x.type.rank();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(group.begin(), group.end(), d) == group.end()) perm.push_back(d);
  }
  for (int64_t d : group) perm.push_back(d);
  bool moved = false;
  for (int64_t d = 0; d < rank; ++d) moved = moved || perm[static_cast<size_t>(d)] != d;
  Value t = moved ? b.transpose(x, perm) : x;
  std::vector<int64_t> out_dims = t.type.dims;
  out_dims.back() = out_last;
  Value f = b.op1("stablehlo.fft", {t}, {out_dtype, out_dims},
                  std::string("fft_type = #stablehlo<fft_type ") + kind + ">, fft_length = " + i64_array(lengths));
  if (!moved) return f;
  std::vector<int64_t> inverse(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
  return b.transpose(f, inverse);
}

// c2c over `dims` in groups of up to three.
Value c2c(HloBuilder& b, Value x, const std::vector<int64_t>& dims, bool forward) {
  for (size_t start = 0; start < dims.size(); start += 3) {
    std::vector<int64_t> group(dims.begin() + static_cast<long>(start),
                               dims.begin() + static_cast<long>(std::min(dims.size(), start + 3)));
    std::vector<int64_t> lengths;
    for (int64_t d : group) lengths.push_back(x.type.dims[static_cast<size_t>(d)]);
    x = fft_over(b, x, group, lengths, forward ? "FFT" : "IFFT", x.type.dtype, lengths.back());
  }
  return x;
}

// PyTorch's normalization of a transform over `n` points, given what XLA already applied (1/n for inverses).
Value normalize(HloBuilder& b, const Value& x, int64_t mode, double n, bool inverse) {
  double want = mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(n) : 1.0 / n;
  double factor = inverse ? want * n : want;
  if (factor == 1.0 || x.type.numel() == 0) return x;
  return b.binary("stablehlo.multiply", x, b.constant(factor, x.type.dtype, x.type.dims));
}

double signal_size(const Value& x, const std::vector<int64_t>& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.type.dims[static_cast<size_t>(d)]);
  return n;
}

// _fft_c2c(self, dim, normalization, forward)
V fft_c2c_rule(OpContext& c) {
  Value x = c.b.convert(c.tensor(0), c.out(0).dtype);
  std::vector<int64_t> dims = fft_dims(c, 1, x.type.rank());
  bool forward = c.flag(3);
  if (dims.empty() || x.type.numel() == 0) return {x};
  Value y = c2c(c.b, x, dims, forward);
  return {normalize(c.b, y, c.integer(2), signal_size(x, dims), !forward)};
}

// _fft_r2c(self, dim, normalization, onesided): the last of `dim` is halved when onesided.
V fft_r2c_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value x = c.b.convert(c.tensor(0), real_of(o.dtype));
  std::vector<int64_t> dims = fft_dims(c, 1, x.type.rank());
  bool onesided = c.flag(3);
  if (dims.empty() || o.numel() == 0 || x.type.numel() == 0) {
    return {o.numel() == 0 ? zeros(c.b, o) : c.b.convert(x, o.dtype)};
  }
  double n = signal_size(x, dims);
  Value y;
  if (!onesided) {
    y = c2c(c.b, c.b.convert(x, o.dtype), dims, true);
  } else {
    // RFFT over the last dim (and up to two before it), then complex FFTs over the rest.
    size_t first = dims.size() > 3 ? dims.size() - 3 : 0;
    std::vector<int64_t> group(dims.begin() + static_cast<long>(first), dims.end());
    std::vector<int64_t> lengths;
    for (int64_t d : group) lengths.push_back(x.type.dims[static_cast<size_t>(d)]);
    y = fft_over(c.b, x, group, lengths, "RFFT", o.dtype, lengths.back() / 2 + 1);
    y = c2c(c.b, y, std::vector<int64_t>(dims.begin(), dims.begin() + static_cast<long>(first)), true);
  }
  return {normalize(c.b, y, c.integer(2), n, false)};
}

// _fft_c2r(self, dim, normalization, last_dim_size): the inverse of a onesided r2c.
V fft_c2r_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value x = c.b.convert(c.tensor(0), complex_of(o.dtype));
  std::vector<int64_t> dims = fft_dims(c, 1, x.type.rank());
  if (o.numel() == 0) return {zeros(c.b, o)};
  if (dims.empty()) return {c.b.op1("stablehlo.real", {x}, {o.dtype, x.type.dims})};
  int64_t last = c.integer(3);
  size_t first = dims.size() > 3 ? dims.size() - 3 : 0;
  // Complex inverse transforms over the leading dims first, then one IRFFT (real result) over the last group.
  Value y = c2c(c.b, x, std::vector<int64_t>(dims.begin(), dims.begin() + static_cast<long>(first)), false);
  std::vector<int64_t> group(dims.begin() + static_cast<long>(first), dims.end());
  std::vector<int64_t> lengths;
  for (int64_t d : group) lengths.push_back(x.type.dims[static_cast<size_t>(d)]);
  lengths.back() = last;
  // IRFFT reads fft_length/2+1 points of the last dim: PyTorch's callers size the input so.
  y = fft_over(c.b, y, group, lengths, "IRFFT", o.dtype, last);
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(o.dims[static_cast<size_t>(d)]);
  return {normalize(c.b, y, c.integer(2), n, true)};
}

// conj_physical(self): ihfft2/ihfftn conjugate their result into place with it.
V conj_physical_rule(OpContext& c) {
  Value x = c.b.convert(c.tensor(0), c.out(0).dtype);
  if (!is_complex(x.type.dtype)) return {x};
  TensorType rt{real_of(x.type.dtype), x.type.dims};
  Value re = c.b.op1("stablehlo.real", {x}, rt);
  Value im = c.b.unary("stablehlo.negate", c.b.op1("stablehlo.imag", {x}, rt));
  return {c.b.op1("stablehlo.complex", {re, im}, x.type)};
}

}  // namespace

void add_fft_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"_fft_c2c", "_fft_c2c.out"}, fft_c2c_rule});
  rows.push_back({{"_fft_r2c", "_fft_r2c.out"}, fft_r2c_rule});
  rows.push_back({{"_fft_c2r", "_fft_c2r.out"}, fft_c2r_rule});
  rows.push_back({{"_conj_physical", "conj_physical_", "conj_physical.out"}, conj_physical_rule});
}

}  // namespace torch_tpu
