// Python view of the PyTorch backend: start it on a runtime, fallback policy, op counters, memory statistics.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/generator.h"
#include "exec/state.h"
#include "backend/storage.h"
#include "backend/host_ops.h"
#include "backend/lowered_op.h"
#include "backend/registry.h"
#include "backend/stablehlo_call.h"
#include "exec/graph.h"
#include "exec/tensor_program.h"
#include "lowering/lib/views.h"
#include "exec/sync.h"
#include "lowering/lib/host_kernels.h"
#include "lowering/lib/op_context.h"
#include "python/module.h"
#include "runtime/client.h"

namespace py = pybind11;

namespace torch_tpu {

bool enable_host_kernels(const Plugin& plugin);  // backend/host_kernels.cpp

namespace {

py::dict memory_stats(int device) {
  check_device_index(device);
  auto stats = tpu_allocator().getDeviceStats(static_cast<c10::DeviceIndex>(device));
  py::dict out;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto put = [&](const char* name, const c10::CachingAllocator::StatArray& a) {
    for (size_t p = 0; p < a.size() && p < 3; ++p) {
      std::string prefix = std::string(name) + "." + pools[p] + ".";
      out[py::str(prefix + "current")] = a[p].current;
      out[py::str(prefix + "peak")] = a[p].peak;
      out[py::str(prefix + "allocated")] = a[p].allocated;
      out[py::str(prefix + "freed")] = a[p].freed;
    }
  };
  put("allocation", stats.allocation);
  put("segment", stats.segment);
  put("active", stats.active);
  put("inactive_split", stats.inactive_split);
  put("allocated_bytes", stats.allocated_bytes);
  put("reserved_bytes", stats.reserved_bytes);
  put("active_bytes", stats.active_bytes);
  put("inactive_split_bytes", stats.inactive_split_bytes);
  put("requested_bytes", stats.requested_bytes);
  out["num_alloc_retries"] = stats.num_alloc_retries;
  out["num_ooms"] = stats.num_ooms;
  out["num_device_alloc"] = stats.num_device_alloc;
  out["num_device_free"] = stats.num_device_free;
  return out;
}

}  // namespace

void bind_backend(py::module_& m) {
  m.def("_backend_init", &set_backend_state, py::arg("client"), py::arg("cache"), py::arg("device_indices"));
  m.def("_enable_host_kernels", [](const Client& client) { return enable_host_kernels(client.plugin()); });
  m.def("_host_kernels", &host_kernels);
  m.def("_set_host_kernels", [](bool on) {  // after _enable_host_kernels registered them; no effect on cached graphs
    TORCH_CHECK(!on || host_kernels_registered(), "the host kernels are not registered with this plugin");
    set_host_kernels(on);
  });
  m.def("_set_host_kernel_min_macs", &set_host_kernel_min_macs);
  m.def("_device_count", &device_count);
  m.def("_current_device", &current_device);
  m.def("_set_device", &set_current_device);
  m.def("_synchronize", &synchronize_device, py::call_guard<py::gil_scoped_release>());
  m.def("_memory_stats", &memory_stats);
  m.def("_reset_peak_memory_stats", [](int d) { tpu_allocator().resetPeakStats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_reset_accumulated_memory_stats",
        [](int d) { tpu_allocator().resetAccumulatedStats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_mem_get_info", [](int d) { return tpu_allocator().getMemoryInfo(static_cast<c10::DeviceIndex>(d)); });
  m.def("_device_capacity", &TpuAllocator::device_capacity);
  m.def("_get_fallback_policy", []() -> std::string {
    switch (fallback_policy()) {
      case FallbackPolicy::kError: return "error";
      case FallbackPolicy::kWarn: return "warn";
      case FallbackPolicy::kSilent: return "silent";
    }
    return "warn";
  });
  m.def("_set_fallback_policy", [](const std::string& policy) {
    if (policy == "error") {
      set_fallback_policy(FallbackPolicy::kError);
    } else if (policy == "warn") {
      set_fallback_policy(FallbackPolicy::kWarn);
    } else if (policy == "silent") {
      set_fallback_policy(FallbackPolicy::kSilent);
    } else {
      throw py::value_error("fallback policy must be error, warn or silent, not '" + policy + "'");
    }
  });
  // Eager mode names, both ways.
  static const std::vector<std::pair<std::string, EagerMode>> kModes = {
      {"debug", EagerMode::kDebug}, {"strict", EagerMode::kStrict}, {"fused", EagerMode::kFused}};
  m.def(
      "_set_eager_mode",
      [](const std::string& mode) {
        for (const auto& [name, value] : kModes) {
          if (name == mode) return set_eager_mode(value);
        }
        throw py::value_error("eager mode must be debug, strict or fused, not '" + mode + "'");
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_get_eager_mode", []() -> std::string {
    for (const auto& [name, value] : kModes) {
      if (value == eager_mode()) return name;
    }
    return "debug";
  });
  m.def("_flush", &flush_all_devices, py::call_guard<py::gil_scoped_release>());
  m.def("_flush_compile_only", &flush_device_compile_only, py::arg("device"),
        "async_compile's warm-up: the device's open graph compiled in the background and not run, when it holds "
        "only this thread's freshly lowered ops; else run. True when it was handed to the compiler (or empty).");
  // Matrix-product precision (torch.tpu.precision): -1 = none (PyTorch's float32 matmul precision applies),
  // 0/1/2 = DEFAULT/HIGH/HIGHEST.
  m.def("_set_precision_override", &set_dot_precision_override);
  m.def("_precision_override", &dot_precision_override);
  m.def("_current_precision", []() { return std::string(dot_precision_name(current_dot_precision())); });
  // TorchTPU's sync/introspection module (torch_tpu/_internal/sync.py) and its execution-mode switches.
  m.def("_pending_program_text", &pending_program_text, py::call_guard<py::gil_scoped_release>());
  m.def("_pending_graph_dot", &pending_graph_dot, py::call_guard<py::gil_scoped_release>());
  m.def("_is_pending", [](const at::Tensor& t) {
    return device_data(t.storage()).membership() == DeviceData::kWritten;
  });
  m.def("_is_in_flight", [](const at::Tensor& t) {
    std::shared_ptr<Buffer> buffer = device_data(t.storage()).raw_buffer();
    return buffer != nullptr && !buffer->ready_event().is_ready();
  });
  m.def("_view_program_text", [](const at::Tensor& t) {  // the program that reads view `t` out of its storage
    HloBuilder b;
    ElementType dtype = element_type_of(t.scalar_type());
    Value storage = b.arg(TensorType{dtype, {static_cast<int64_t>(t.storage().nbytes()) / element_size(dtype)}});
    return b.build({read_view(b, storage, ViewSpec{t.sizes().vec(), t.strides().vec(), t.storage_offset()})});
  });
  m.def("_stablehlo_call", &record_stablehlo_call);
  m.def("_set_inplace_donation", &set_inplace_donation);
  m.def("_inplace_donation", &inplace_donation);
  m.def("_release_finished", &release_all_finished, py::call_guard<py::gil_scoped_release>());
  m.def("_set_graph_node_limit", &set_graph_node_limit);
  m.def("_host_sync_counts", &host_sync_counts);
  m.def("_reset_host_sync_counts", &reset_host_sync_counts);
  m.def("_fallback_counts", &fallback_counts);
  m.def("_lowered_counts", &lowered_counts);
  m.def("_host_op_counts", &host_op_counts);
  m.def("_reset_op_counts", &reset_op_counts);
  m.def("_default_generator", [](int device) {
    check_device_index(device);
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_tpu_generator(static_cast<c10::DeviceIndex>(device))));
  });
  m.def("_lowered_ops", []() {  // every overload served by a row, with whether it was derived from the schemas
    std::vector<std::pair<std::string, bool>> out;
    for (const auto& [name, entry] : registered_overloads()) out.emplace_back(name.substr(6), entry.derived);
    return out;
  });
  m.def("_unknown_row_names", &unknown_row_names);
}

}  // namespace torch_tpu
