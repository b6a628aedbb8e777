// Ops that run on the host by design, not as a fallback:
// - random ops draw from the tpu generator's CPU engine and copy the values to the device, so seeding
//   (torch.manual_seed, torch.tpu.manual_seed, generators) reproduces them exactly and matches CPU draws
//   (device-side rng_bit_generator is the later fast path);
// - ops whose result shape depends on the data (nonzero, masked_select, unique) need the values on the host anyway;
//   bincount, repeat_interleave and histogram read only their result's length or range and compute on the device.
// Each run is counted in metrics()["host_ops"].
#include <ATen/ATen.h>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <torch/library.h>

#include <ATen/CPUGeneratorImpl.h>

#include "backend/generator.h"
#include "exec/state.h"
#include "backend/fallback.h"
#include "backend/host_ops.h"
#include "backend/lowered_op.h"
#include "exec/graph.h"
#include "exec/tensor_program.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

std::mutex g_counts_mu;
std::map<std::string, int64_t> g_counts;

// The boxed kernel of the ops listed at the end: counted, then run through their CPU kernels.
void run_host_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  {
    std::lock_guard<std::mutex> lock(g_counts_mu);
    g_counts[op_label(op)]++;
  }
  run_on_host(op, stack);
}

// Dropout draws its mask on the device (threefry rng_bit_generator) from a key taken from the tpu generator, so it
// stays reproducible under seeding without moving a mask-sized tensor from the host.
std::tuple<at::Tensor, at::Tensor> tpu_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (!train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  int device = input.device().index();
  uint64_t key[2];
  {
    at::Generator host = host_generator_for(std::nullopt, static_cast<c10::DeviceIndex>(device));
    std::lock_guard<std::mutex> lock(host.mutex());
    auto* engine = at::check_generator<at::CPUGeneratorImpl>(host);
    key[0] = engine->random64();
    key[1] = engine->random64();
  }
  at::Tensor out_t, mask_t;
  with_program(device, [&](TensorProgram& prog) {
    HloBuilder& b = prog.builder();
    std::vector<int64_t> dims = input.sizes().vec();
    int64_t n = input.numel();
    // The key is a program argument: a constant would make every call a new program to compile.
    const BackendState& backend = backend_state();
    Value state = prog.external(backend.client->buffer_from_host(key, ElementType::kU64, {2}, {},
                                                                 backend.pjrt_index.at(device)));
    std::vector<Value> rng = b.op("stablehlo.rng_bit_generator", {state},
                                  {{ElementType::kU64, {2}}, {ElementType::kU32, {std::max<int64_t>(n, 1)}}},
                                  "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
    Value bits = b.slice(rng[1], {0}, {n});
    // Keep an element when its 32 random bits fall below (1 - p) * 2^32.
    double threshold = std::min((1.0 - p) * 4294967296.0, 4294967295.0);
    Value keep = b.compare(CompareDirection::kLt, bits, b.constant(threshold, ElementType::kU32, {n}));
    keep = b.reshape(keep, dims);
    Value x = prog.read(input);
    Value scaled = b.binary("stablehlo.multiply", x, b.constant(1.0 / (1.0 - p), x.type.dtype, dims));
    Value out = b.select(keep, scaled, zeros(b, x.type));
    out_t = prog.output(out, input.scalar_type());
    mask_t = prog.output(keep, at::kBool);
  });
  return {out_t, mask_t};
}

// bincount's result length is the largest input value + 1: one host read of the input's min and max (as on CUDA),
// then the counting itself is a scatter-add on the device.
at::Tensor tpu_bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  bool weighted = weights.has_value() && weights->defined();
  if (weighted) {
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  }
  at::ScalarType out_type =
      !weighted ? at::kLong : (weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble);
  int64_t length = minlength;
  if (self.numel() > 0) {
    at::Tensor extremes = at::stack({self.min(), self.max()}).to(at::kLong).cpu();
    const int64_t* v = extremes.const_data_ptr<int64_t>();
    TORCH_CHECK(v[0] >= 0, "bincount only supports 1-d non-negative integral inputs.");
    length = std::max(length, v[1] + 1);
  }
  at::Tensor out = at::zeros({length}, self.options().dtype(out_type));
  if (self.numel() == 0) return out;
  at::Tensor counts = weighted ? weights->to(out_type) : at::ones_like(self, self.options().dtype(out_type));
  return out.index_add_(0, self, counts);
}

// repeat_interleave(repeats): index i repeated repeats[i] times. The result's length is the repeats' sum: given as
// output_size nothing is read; otherwise one host read of their sum and minimum (CUDA reads the sum too). Element k
// is then the number of running totals <= k (searchsorted, right side), on the device.
at::Tensor tpu_repeat_interleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  int64_t total = 0;
  if (output_size.has_value()) {
    total = output_size->expect_int();
  } else if (repeats.numel() > 0) {
    at::Tensor stats = at::stack({repeats.sum(), repeats.min()}).to(at::kLong).cpu();
    const int64_t* v = stats.const_data_ptr<int64_t>();
    TORCH_CHECK(v[1] >= 0, "repeats can not be negative");
    total = v[0];
  }
  at::Tensor running = repeats.cumsum(0, repeats.scalar_type());
  at::Tensor positions = at::arange(total, repeats.options());
  return at::searchsorted(running, positions, /*out_int32=*/repeats.scalar_type() == at::kInt, /*right=*/true);
}

// Histograms over D-dimensional points (a 1-D histogram is D = 1). A point falls, per dimension, in the last bin
// whose left edge is <= its coordinate (the rightmost edge closes the last bin); points outside the edges or with a
// NaN coordinate are not counted. That is what CPU's linear search with local correction computes, here as one
// searchsorted per dimension and one scatter-add on the device.
at::Tensor histogram_from_edges(const at::Tensor& self, at::TensorList edges, const std::optional<at::Tensor>& weight,
                                bool density) {
  const int64_t dims = static_cast<int64_t>(edges.size());
  std::vector<int64_t> shape;
  for (const at::Tensor& e : edges) {
    TORCH_CHECK(e.dim() == 1, "torch.histogramdd(): bins tensor should have one dimension, but got ", e.dim(),
                " dimensions in the bins tensor");
    TORCH_CHECK(e.numel() > 0, "torch.histogramdd(): bins tensor should have at least 1 element, but got ",
                e.numel(), " elements in the bins tensor");
    TORCH_CHECK(e.scalar_type() == self.scalar_type(), "torch.histogramdd: input tensor and bins tensors should",
                " have the same dtype, but got input ", self.scalar_type(), " and bins ", e.scalar_type());
    shape.push_back(e.numel() - 1);
  }
  const bool weighted = weight.has_value() && weight->defined();
  at::Tensor hist = at::zeros(shape, self.options());
  const int64_t cells = hist.numel();
  at::Tensor points = self.reshape({-1, dims});
  if (cells == 0 || points.size(0) == 0) return hist;
  at::Tensor inside = at::ones({points.size(0)}, self.options().dtype(at::kBool));
  at::Tensor flat = at::zeros({points.size(0)}, self.options().dtype(at::kLong));
  for (int64_t d = 0; d < dims; ++d) {
    const at::Tensor& e = edges[d];
    at::Tensor x = points.select(1, d).contiguous();
    inside = inside.logical_and(x.ge(e.select(0, 0))).logical_and(x.le(e.select(0, shape[d])));
    at::Tensor bin = at::searchsorted(e, x, /*out_int32=*/false, /*right=*/true).sub(1).clamp(0, shape[d] - 1);
    flat = flat.mul(shape[d]).add(bin);
  }
  at::Tensor counts = weighted ? weight->reshape({-1}).to(self.scalar_type()) : at::ones({points.size(0)}, self.options());
  hist = hist.reshape({cells}).index_add(0, flat, counts.mul(inside.to(self.scalar_type()))).reshape(shape);
  if (density) {
    hist = hist.div(hist.sum());
    for (int64_t d = 0; d < dims; ++d) {
      std::vector<int64_t> along(static_cast<size_t>(dims), 1);
      along[d] = shape[d];
      hist = hist.div(edges[d].diff().reshape(along));
    }
  }
  return hist;
}

// Edges from a bin count per dimension: spanning range, or the points' min and max per dimension (one host read, as
// CPU and CUDA read them), widened by 0.5 each way where they are equal; [0, 1] for no points.
std::vector<at::Tensor> histogram_edges(const at::Tensor& self, at::IntArrayRef bins,
                                        std::optional<at::ArrayRef<double>> range) {
  const int64_t dims = static_cast<int64_t>(bins.size());
  std::vector<double> left(bins.size(), 0.0), right(bins.size(), 1.0);
  if (range.has_value() && !range->empty()) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * dims, "torch.histogramdd: for a ", dims,
                "-dimensional histogram range should have ", 2 * dims, " elements, but got ", range->size());
    for (int64_t d = 0; d < dims; ++d) {
      left[d] = (*range)[2 * d];
      right[d] = (*range)[2 * d + 1];
    }
  } else if (self.numel() > 0) {
    at::Tensor points = self.reshape({-1, dims});
    at::Tensor extremes = at::stack({std::get<0>(points.min(0)), std::get<0>(points.max(0))}).to(at::kDouble).cpu();
    const double* v = extremes.const_data_ptr<double>();
    for (int64_t d = 0; d < dims; ++d) {
      left[d] = v[d];
      right[d] = v[dims + d];
    }
  }
  std::vector<at::Tensor> edges;
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK(bins[d] > 0, "torch.histogramdd(): bins must be > 0, but got ", bins[d], " for dimension ", d);
    TORCH_CHECK(left[d] <= right[d], "torch.histogramdd: min should not exceed max, but got min ", left[d], " max ",
                right[d], " for dimension ", d);
    TORCH_CHECK(std::isfinite(left[d]) && std::isfinite(right[d]), "torch.histogramdd: dimension ", d,
                "'s range [", left[d], ", ", right[d], "] is not finite");
    if (left[d] == right[d]) {
      left[d] -= 0.5;
      right[d] += 0.5;
    }
    edges.push_back(at::linspace(left[d], right[d], bins[d] + 1, self.options()));
  }
  return edges;
}

// histogramdd takes points as the innermost dimension of an input of at least 2 dimensions; histogram flattens.
void check_points(const at::Tensor& self, int64_t dims, const std::optional<at::Tensor>& weight, bool dd) {
  if (dd) {
    TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
    TORCH_CHECK(self.size(-1) == dims,
                "histogramdd: The size of bins must be equal to the innermost dimension of the input.");
  }
  if (weight.has_value() && weight->defined()) {
    bool same = dd ? weight->sizes() == self.sizes().slice(0, self.dim() - 1) : weight->sizes() == self.sizes();
    TORCH_CHECK(same, "torch.histogramdd: if weight tensor is provided it should have the same shape as the input",
                " tensor excluding its innermost dimension");
  }
}

std::tuple<at::Tensor, at::Tensor> tpu_histogram_bins_tensor(const at::Tensor& self, const at::Tensor& bins,
                                                             const std::optional<at::Tensor>& weight, bool density) {
  check_points(self, 1, weight, false);
  return {histogram_from_edges(self, {bins}, weight, density), bins.clone()};
}

std::tuple<at::Tensor, at::Tensor> tpu_histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                        std::optional<at::ArrayRef<double>> range,
                                                        const std::optional<at::Tensor>& weight, bool density) {
  check_points(self, 1, weight, false);
  std::vector<at::Tensor> edges = histogram_edges(self, {bins}, range);
  return {histogram_from_edges(self, edges, weight, density), edges[0]};
}

std::vector<at::Tensor> tpu_histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                                  std::optional<at::ArrayRef<double>> range,
                                                  const std::optional<at::Tensor>& weight, bool density) {
  check_points(self, static_cast<int64_t>(bins.size()), weight, true);
  return histogram_edges(self, bins, range);
}

at::Tensor tpu_histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins,
                                        std::optional<at::ArrayRef<double>> range,
                                        const std::optional<at::Tensor>& weight, bool density) {
  check_points(self, static_cast<int64_t>(bins.size()), weight, true);
  return histogram_from_edges(self, histogram_edges(self, bins, range), weight, density);
}

at::Tensor tpu_histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                            const std::optional<at::Tensor>& weight, bool density) {
  check_points(self, static_cast<int64_t>(bins.size()), weight, true);
  return histogram_from_edges(self, bins, weight, density);
}

}  // namespace

std::map<std::string, int64_t> host_op_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  return g_counts;
}

void clear_host_op_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  g_counts.clear();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"uniform_", "normal_", "normal.Tensor_float", "normal.float_Tensor", "normal.Tensor_Tensor",
        "normal.Tensor_float_out", "normal.float_Tensor_out", "normal.Tensor_Tensor_out", "bernoulli_.float",
        "bernoulli_.Tensor", "bernoulli", "bernoulli.p", "bernoulli.out", "random_", "random_.from", "random_.to",
        "exponential_", "geometric_", "log_normal_", "cauchy_", "multinomial", "multinomial.out",
        "randperm.generator_out", "nonzero", "nonzero.out", "masked_select", "masked_select.out", "_unique", "_unique2",
        "unique_consecutive", "unique_dim"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_host_op>());
  }
  m.impl("native_dropout", TORCH_FN(tpu_native_dropout));
  m.impl("bincount", TORCH_FN(tpu_bincount));
  m.impl("repeat_interleave.Tensor", TORCH_FN(tpu_repeat_interleave));
  m.impl("histogram.bins_tensor", TORCH_FN(tpu_histogram_bins_tensor));
  m.impl("histogram.bin_ct", TORCH_FN(tpu_histogram_bin_ct));
  m.impl("_histogramdd_bin_edges", TORCH_FN(tpu_histogramdd_bin_edges));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(tpu_histogramdd_from_bin_cts));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(tpu_histogramdd_from_bin_tensors));
}

}  // namespace torch_tpu
