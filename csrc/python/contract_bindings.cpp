// Python view of the rest of PyTorch's accelerator contract: fork poisoning, device capabilities, DLPack, profiler.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/utils/device_lazy_init.h>

#include "exec/state.h"
#include "python/module.h"
#include "runtime/pjrt.h"

namespace py = pybind11;

namespace torch_tpu {

void bind_contract(py::module_& m) {
  // A child forked after the runtime started cannot use it (the plugin's threads stay in the parent).
  m.def("_is_in_bad_fork", &in_forked_child);
  // PyTorch's own child-side handler: re-runs lazy init (torch.tpu._lazy_init, which raises) in a forked child.
  m.def("_register_fork_handler", [] { torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1); });
}

}  // namespace torch_tpu
