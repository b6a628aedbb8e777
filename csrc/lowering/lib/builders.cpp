#include "lowering/lib/builders.h"

namespace torch_tpu {
namespace {

// The dims of [0, rank) except d.
std::vector<int64_t> others(int64_t rank, int64_t d) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != d) out.push_back(i);
  }
  return out;
}

}  // namespace

Value gather_dim(HloBuilder& b, const Value& x, const Value& idx, int64_t d) {
  int64_t n = idx.type.dims[0], rank = x.type.rank();
  std::vector<int64_t> slice = x.type.dims, out = x.type.dims;
  slice[d] = 1;
  out[d] = n;
  std::vector<int64_t> offs = others(rank, d);
  std::string attrs = "dimension_numbers = #stablehlo.gather<" +
                      (offs.empty() ? std::string() : "offset_dims = " + i64_list(offs) + ", ") +
                      "collapsed_slice_dims = [" + std::to_string(d) + "], start_index_map = [" + std::to_string(d) +
                      "], index_vector_dim = 1>, slice_sizes = " + i64_array(slice) + ", indices_are_sorted = false";
  return b.op1("stablehlo.gather", {x, b.reshape(idx, {n, 1})}, {x.type.dtype, out}, attrs);
}

Value scatter_add_dim(HloBuilder& b, const Value& into, const Value& updates, const Value& idx, int64_t d) {
  int64_t n = idx.type.dims[0];
  TensorType s{into.type.dtype, {}};
  std::string body = b.region({s, s}, [](HloBuilder& r, const std::vector<Value>& a) { return std::vector<Value>{r.binary("stablehlo.add", a[0], a[1])}; });
  std::vector<int64_t> win = others(into.type.rank(), d);
  std::string attrs = "scatter_dimension_numbers = #stablehlo.scatter<" +
                      (win.empty() ? std::string() : "update_window_dims = " + i64_list(win) + ", ") +
                      "inserted_window_dims = [" + std::to_string(d) + "], scatter_dims_to_operand_dims = [" +
                      std::to_string(d) + "], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false";
  return b.op1("stablehlo.scatter", {into, b.reshape(idx, {n, 1}), updates}, into.type, attrs, {body});
}

Value prefix_reduce(HloBuilder& b, const Value& x, int64_t dim, const std::string& combiner, double init) {
  int64_t rank = x.type.rank(), n = x.type.dims[dim];
  if (n <= 1) return x;
  std::vector<int64_t> window(rank, 1), strides(rank, 1);
  window[dim] = n;
  std::string pad = "dense<[";
  for (int64_t d = 0; d < rank; ++d) pad += std::string(d ? ", " : "") + (d == dim ? "[" + std::to_string(n - 1) + ", 0]" : "[0, 0]");
  pad += "]> : tensor<" + std::to_string(rank) + "x2xi64>";
  TensorType scalar{x.type.dtype, {}};
  std::string body = b.region({scalar, scalar}, [&](HloBuilder& rb, const std::vector<Value>& args) -> std::vector<Value> {
    return {rb.op1(combiner, {args[0], args[1]}, scalar)};
  });
  return b.op1("stablehlo.reduce_window", {x, b.constant(init, x.type.dtype)}, x.type,
               "window_dimensions = " + i64_array(window) + ", window_strides = " + i64_array(strides) +
                   ", padding = " + pad,
               {body});
}

}  // namespace torch_tpu
