// torch_tpu._C.TpuDistBackend: the c10d backend object torch_tpu/distributed.py hands to torch.distributed.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>

#include <torch/csrc/utils/pybind.h>

#include "distributed/tpu_dist.h"
#include "python/module.h"

namespace py = pybind11;

namespace torch_tpu {

void bind_distributed(py::module_& m) {
  // The base class c10d::Backend is registered by torch._C._distributed_c10d; import it so pybind knows it. A torch
  // built without distributed support has no such module: then there is no tpu_dist (torch_tpu still loads).
  try {
    py::module_::import("torch._C._distributed_c10d");
  } catch (const py::error_already_set&) {
    return;
  }
  py::class_<TpuDistBackend, c10d::Backend, c10::intrusive_ptr<TpuDistBackend>>(m, "TpuDistBackend")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int, std::chrono::milliseconds, bool, bool>(),
           py::arg("host_backend"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("check_agreement") = true, py::arg("cpu_zero_copy") = true,
           "A tpu_dist backend over `host_backend` (a c10d backend on host tensors, e.g. ProcessGroupGloo). With "
           "check_agreement, ranks compare each collective's op, dtype and shapes first and raise on a mismatch. With "
           "cpu_zero_copy, on the XLA-CPU plugin, staging reads device buffers with a memcpy and results become "
           "device buffers without a copy.")
      .def_property_readonly("host_backend", &TpuDistBackend::host_backend)
      .def("_set_mailbox", &TpuDistBackend::set_mailbox, py::arg("mailbox"),
           "Compare collectives' signatures through this shared-memory mailbox (all ranks on this host).")
      .def_property_readonly("uses_mailbox", &TpuDistBackend::uses_mailbox);
  py::class_<SharedMailbox, std::shared_ptr<SharedMailbox>>(m, "SharedMailbox")
      .def(py::init<std::string, int, int, bool>(), py::arg("name"), py::arg("rank"), py::arg("size"),
           py::arg("create"))
      .def("unlink", &SharedMailbox::unlink)
      .def_property_readonly("name", &SharedMailbox::name);
}

}  // namespace torch_tpu
