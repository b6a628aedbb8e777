// torch_tpu::Error -> torch_tpu._C.TpuError (a RuntimeError carrying .code, .call and .pjrt_message).
// RESOURCE_EXHAUSTED becomes torch.OutOfMemoryError where torch is loaded, as PyTorch users expect.
#include "python/module.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace torch_tpu {
namespace {
PyObject* g_tpu_error = nullptr;
}

void bind_errors(py::module_& m) {
  static py::exception<Error> tpu_error(m, "TpuError", PyExc_RuntimeError);
  g_tpu_error = tpu_error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = g_tpu_error;
      if (e.code() == ErrorCode::kResourceExhausted) {
        py::object torch = py::module_::import("sys").attr("modules").attr("get")("torch");
        if (!torch.is_none() && py::hasattr(torch, "OutOfMemoryError")) type = torch.attr("OutOfMemoryError").ptr();
      }
      py::object instance = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", e.what()));
      if (!instance) return;  // Python error already set
      PyObject_SetAttrString(instance.ptr(), "code", py::str(error_code_name(e.code())).ptr());
      PyObject_SetAttrString(instance.ptr(), "call", py::str(e.call()).ptr());
      PyObject_SetAttrString(instance.ptr(), "pjrt_message", py::str(e.message()).ptr());
      PyErr_SetObject(type, instance.ptr());
    }
  });
}

}  // namespace torch_tpu
