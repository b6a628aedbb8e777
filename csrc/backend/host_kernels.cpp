// Host kernels: torch's own CPU kernels (MKL, oneDNN) as XLA FFI custom-call targets on the XLA-CPU plugin, whose
// dots take 1.2-1.6x CPU PyTorch's time on the transposed operands of a linear layer's forward and weight gradient
// (benchmarks/eager_parts.py). The program still owns every buffer: a handler reads its operands and writes its
// result in place, on the thread XLA runs it on (the kernel's OpenMP team starts from there).
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "lowering/lib/host_kernels.h"
#include "runtime/client.h"
#include "runtime/xla_ffi.h"

namespace torch_tpu {
namespace {

bool g_registered = false;
bool g_host_kernels = false;
int64_t g_min_macs = kHostKernelMinMacs;

at::Tensor view_of(const void* item) {
  const auto* b = static_cast<const xla_ffi::Buffer*>(item);
  at::ScalarType t;
  switch (b->dtype) {
    case xla_ffi::DataType::kF32: t = at::kFloat; break;
    case xla_ffi::DataType::kF64: t = at::kDouble; break;
    default: throw std::invalid_argument("unsupported element type " + std::to_string(static_cast<int>(b->dtype)));
  }
  return at::from_blob(b->data, at::IntArrayRef(b->dims, static_cast<size_t>(b->rank)), at::TensorOptions(t));
}

// The int64 array attribute `name` (attributes come sorted by name; there are only a few).
std::vector<int64_t> ints_attr(const xla_ffi::CallFrame* frame, const std::string& name) {
  const xla_ffi::Attrs& a = frame->attrs;
  for (int64_t i = 0; i < a.size; ++i) {
    if (std::string(a.names[i]->ptr, a.names[i]->len) != name) continue;
    const auto* array = static_cast<const xla_ffi::Array*>(a.attrs[i]);
    if (a.types[i] != xla_ffi::AttrType::kArray || array->dtype != xla_ffi::DataType::kS64) break;
    const auto* data = static_cast<const int64_t*>(array->data);
    return std::vector<int64_t>(data, data + array->size);
  }
  throw std::invalid_argument("missing int64 array attribute '" + name + "'");
}

// What every handler does around its kernel: answer XLA's metadata query, act only at the execute stage, check the
// operand and result counts, and turn a C++ exception into an XLA error naming the target.
template <typename Kernel>
xla_ffi::Error* handle(xla_ffi::CallFrame* frame, const char* target, int64_t operands, Kernel kernel) {
  if (xla_ffi::answer_metadata_query(frame) || frame->stage != xla_ffi::Stage::kExecute) return nullptr;
  std::string message;
  try {
    if (frame->args.size != operands || frame->rets.size != 1) {
      throw std::invalid_argument("expects " + std::to_string(operands) + " operands and one result");
    }
    std::vector<at::Tensor> in;
    for (int64_t i = 0; i < operands; ++i) in.push_back(view_of(frame->args.items[i]));
    at::Tensor out = view_of(frame->rets.items[0]);
    kernel(frame, in, out);
    return nullptr;
  } catch (const std::exception& e) {
    message = std::string(target) + ": " + e.what();
  }
  xla_ffi::ErrorCreateArgs args{sizeof(xla_ffi::ErrorCreateArgs), nullptr, message.c_str(),
                                xla_ffi::ErrorCode::kInternal};
  return frame->api->error_create(&args);
}

// out = op(a) @ op(b) over the last two dims (rank 2, or rank 3 with a leading batch); op transposes when asked.
template <bool kTransposeA, bool kTransposeB>
xla_ffi::Error* gemm(xla_ffi::CallFrame* frame) {
  return handle(frame, "torch_tpu.gemm", 2, [](auto*, std::vector<at::Tensor>& in, at::Tensor& out) {
    at::Tensor a = kTransposeA ? in[0].transpose(-1, -2) : in[0];
    at::Tensor b = kTransposeB ? in[1].transpose(-1, -2) : in[1];
    if (out.dim() == 2) {
      at::mm_out(out, a, b);
    } else {
      at::bmm_out(out, a, b);
    }
  });
}

// A plain (not transposed) convolution without bias: attribute `params` = stride, padding, dilation (nd each), groups.
struct ConvAttrs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};
ConvAttrs conv_attrs(const xla_ffi::CallFrame* frame, size_t nd) {
  std::vector<int64_t> p = ints_attr(frame, "params");
  if (p.size() != 3 * nd + 1) throw std::invalid_argument("params has " + std::to_string(p.size()) + " entries");
  auto part = [&](size_t i) { return std::vector<int64_t>(p.begin() + i * nd, p.begin() + (i + 1) * nd); };
  return {part(0), part(1), part(2), p.back()};
}

// (input, weight) -> output
xla_ffi::Error* conv(xla_ffi::CallFrame* frame) {
  return handle(frame, "torch_tpu.conv", 2, [](auto* f, std::vector<at::Tensor>& in, at::Tensor& out) {
    ConvAttrs a = conv_attrs(f, static_cast<size_t>(in[1].dim() - 2));
    std::vector<int64_t> no_output_padding(a.stride.size(), 0);
    out.copy_(at::convolution(in[0], in[1], {}, a.stride, a.padding, a.dilation, false, no_output_padding, a.groups));
  });
}

// (grad_output, input, weight) -> the gradient of the input (kInput) or of the weight.
template <int kWhich>
xla_ffi::Error* conv_grad(xla_ffi::CallFrame* frame) {
  return handle(frame, "torch_tpu.conv_grad", 3, [](auto* f, std::vector<at::Tensor>& in, at::Tensor& out) {
    ConvAttrs a = conv_attrs(f, static_cast<size_t>(in[2].dim() - 2));
    std::vector<int64_t> no_output_padding(a.stride.size(), 0);
    auto grads = at::convolution_backward(in[0], in[1], in[2], std::nullopt, a.stride, a.padding, a.dilation, false,
                                          no_output_padding, a.groups, {kWhich == 0, kWhich == 1, false});
    out.copy_(kWhich == 0 ? std::get<0>(grads) : std::get<1>(grads));
  });
}

}  // namespace

void set_host_kernels(bool on) { g_host_kernels = on; }
bool host_kernels() { return g_host_kernels; }
bool host_kernels_registered() { return g_registered; }
int64_t host_kernel_min_macs() { return g_min_macs; }
int64_t set_host_kernel_min_macs(int64_t macs) { return std::exchange(g_min_macs, macs); }

// Registers every target with the plugin; rules emit them only when all were accepted.
bool enable_host_kernels(const Plugin& plugin) {
  const std::vector<std::pair<const char*, xla_ffi::Handler*>> targets = {
      {"torch_tpu.gemm_nn", &gemm<false, false>}, {"torch_tpu.gemm_nt", &gemm<false, true>},
      {"torch_tpu.gemm_tn", &gemm<true, false>},  {"torch_tpu.gemm_tt", &gemm<true, true>},
      {"torch_tpu.conv", &conv},                  {"torch_tpu.conv_input_grad", &conv_grad<0>},
      {"torch_tpu.conv_weight_grad", &conv_grad<1>},
  };
  bool ok = true;
  for (const auto& [name, handler] : targets) {
    ok = ok && plugin.register_ffi_handler(name, "Host", reinterpret_cast<void*>(handler));
  }
  g_registered = ok;
  set_host_kernels(ok);
  return ok;
}

}  // namespace torch_tpu
