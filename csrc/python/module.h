// Pieces of the torch_tpu._C extension module, each defined in its own file.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu {

void bind_errors(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_hlo(pybind11::module_& m);
void bind_backend(pybind11::module_& m);
void bind_replay(pybind11::module_& m);
void bind_contract(pybind11::module_& m);
void bind_distributed(pybind11::module_& m);  // csrc/distributed/bindings.cpp

}  // namespace torch_tpu
