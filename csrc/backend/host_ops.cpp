// Ops that run on the host by design, not as a fallback:
// - random ops draw from the tpu generator's CPU engine and copy the values to the device, so seeding
//   (torch.manual_seed, torch.tpu.manual_seed, generators) reproduces them exactly and matches CPU draws
//   (device-side rng_bit_generator is the later fast path);
// - ops whose result shape depends on the data (nonzero, masked_select, unique) need the values on the host anyway;
//   bincount, repeat_interleave and histogram read only their result's length or range and compute on the device.
// Each run is counted in metrics()["host_ops"].
#include <ATen/ATen.h>
#include <cmath>
#include <torch/library.h>

#include <ATen/CPUGeneratorImpl.h>

#include "backend/generator.h"
#include "exec/state.h"
#include "backend/lowered_op.h"
#include "exec/graph.h"
#include "exec/tensor_program.h"
#include "lowering/op_context.h"

namespace torch_tpu {
namespace {

void run_host_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  count_host_op(op);
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

// histogram with explicit edges: element x falls in the last bin whose left edge is <= x (the rightmost edge closes
// the last bin); elements outside [edges[0], edges[-1]] and NaN are not counted. That is what CPU's linear search
// with local correction computes, here as one searchsorted and one scatter-add on the device.
std::tuple<at::Tensor, at::Tensor> tpu_histogram_bins_tensor(const at::Tensor& self, const at::Tensor& bins,
                                                             const std::optional<at::Tensor>& weight, bool density) {
  TORCH_CHECK(bins.dim() == 1, "torch.histogram(): bins tensor should have one dimension, but got ", bins.dim(),
              " dimensions in the bins tensor");
  TORCH_CHECK(bins.numel() > 0, "torch.histogram(): bins tensor should have at least 1 element, but got ",
              bins.numel(), " elements in the bins tensor");
  TORCH_CHECK(self.scalar_type() == bins.scalar_type(), "torch.histogram: input tensor and bins tensors should",
              " have the same dtype, but got input ", self.scalar_type(), " and bins ", bins.scalar_type());
  bool weighted = weight.has_value() && weight->defined();
  if (weighted) {
    TORCH_CHECK(weight->sizes() == self.sizes(), "torch.histogram: if weight tensor is provided it should have",
                " the same shape as the input tensor excluding its innermost dimension");
  }
  const int64_t n_bins = bins.numel() - 1;
  at::Tensor hist = at::zeros({std::max<int64_t>(n_bins, 0)}, self.options());
  if (n_bins <= 0 || self.numel() == 0) return {hist, bins.clone()};
  at::Tensor x = self.reshape({-1});
  at::Tensor first = bins.select(0, 0), last = bins.select(0, n_bins);
  at::Tensor inside = x.ge(first).logical_and(x.le(last));
  at::Tensor bin = at::searchsorted(bins, x, /*out_int32=*/false, /*right=*/true).sub(1).clamp(0, n_bins - 1);
  at::Tensor counts = weighted ? weight->reshape({-1}).to(self.scalar_type()) : at::ones_like(x);
  hist.index_add_(0, bin, counts.mul(inside.to(self.scalar_type())));
  if (density) {
    hist = hist.div(hist.sum()).div(bins.diff());
  }
  return {hist, bins.clone()};
}

// histogram with a bin count: the edges span range, or the input's min and max (one host read, as CPU and CUDA
// read them), widened by 0.5 each way when they are equal; [0, 1] for an empty input.
std::tuple<at::Tensor, at::Tensor> tpu_histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                        std::optional<at::ArrayRef<double>> range,
                                                        const std::optional<at::Tensor>& weight, bool density) {
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  double left = 0, right = 1;
  if (range.has_value() && !range->empty()) {
    TORCH_CHECK(range->size() == 2, "torch.histogram(): range should have 2 elements, but got ", range->size());
    left = (*range)[0];
    right = (*range)[1];
  } else if (self.numel() > 0) {
    at::Tensor extremes = at::stack({self.min(), self.max()}).to(at::kDouble).cpu();
    left = extremes.const_data_ptr<double>()[0];
    right = extremes.const_data_ptr<double>()[1];
  }
  TORCH_CHECK(left <= right, "torch.histogramdd: min should not exceed max, but got min ", left, " max ", right,
              " for dimension 0");
  TORCH_CHECK(std::isfinite(left) && std::isfinite(right), "torch.histogramdd: dimension 0's range [", left, ", ",
              right, "] is not finite");
  if (left == right) {
    left -= 0.5;
    right += 0.5;
  }
  at::Tensor edges = at::linspace(left, right, bins + 1, self.options());
  return tpu_histogram_bins_tensor(self, edges, weight, density);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"uniform_", "normal_", "normal.Tensor_float", "normal.float_Tensor", "normal.Tensor_Tensor",
        "normal.Tensor_float_out", "normal.float_Tensor_out", "normal.Tensor_Tensor_out", "bernoulli_.float",
        "bernoulli_.Tensor", "bernoulli", "bernoulli.p", "bernoulli.out", "random_", "random_.from", "random_.to",
        "exponential_", "geometric_", "log_normal_", "cauchy_", "multinomial", "multinomial.out",
        "randperm.generator_out", "nonzero", "nonzero.out", "masked_select", "masked_select.out", "_unique2",
        "unique_consecutive", "unique_dim"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_host_op>());
  }
  m.impl("native_dropout", TORCH_FN(tpu_native_dropout));
  m.impl("bincount", TORCH_FN(tpu_bincount));
  m.impl("repeat_interleave.Tensor", TORCH_FN(tpu_repeat_interleave));
  m.impl("histogram.bins_tensor", TORCH_FN(tpu_histogram_bins_tensor));
  m.impl("histogram.bin_ct", TORCH_FN(tpu_histogram_bin_ct));
}

}  // namespace torch_tpu
