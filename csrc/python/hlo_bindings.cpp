// Python view of hlo/HloBuilder, so tests (and experiments) can build programs the way lowering rules do.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "hlo/builder.h"
#include "python/module.h"

namespace py = pybind11;

namespace torch_tpu {
namespace {
TensorType make_type(const std::string& dtype, const std::vector<int64_t>& dims) {
  return TensorType{element_type_from_name(dtype), dims};
}
}  // namespace

void bind_hlo(py::module_& m) {
  py::class_<Value>(m, "HloValue")
      .def_readonly("name", &Value::name)
      .def_property_readonly("dtype", [](const Value& v) { return element_type_name(v.type.dtype); })
      .def_property_readonly("dims", [](const Value& v) { return v.type.dims; })
      .def_property_readonly("type", [](const Value& v) { return v.type.str(); });

  py::enum_<CompareDirection>(m, "CompareDirection")
      .value("EQ", CompareDirection::kEq)
      .value("NE", CompareDirection::kNe)
      .value("LT", CompareDirection::kLt)
      .value("LE", CompareDirection::kLe)
      .value("GT", CompareDirection::kGt)
      .value("GE", CompareDirection::kGe);

  py::class_<HloBuilder>(m, "HloBuilder")
      .def(py::init<>())
      .def("arg", [](HloBuilder& b, const std::string& dtype, const std::vector<int64_t>& dims,
                     int alias) { return b.arg(make_type(dtype, dims), alias); },
           py::arg("dtype"), py::arg("dims"), py::arg("alias_output") = -1)
      .def("op", [](HloBuilder& b, const std::string& name, const std::vector<Value>& operands, const std::string& dtype,
                    const std::vector<int64_t>& dims,
                    const std::string& attrs) { return b.op1(name, operands, make_type(dtype, dims), attrs); },
           py::arg("name"), py::arg("operands"), py::arg("dtype"), py::arg("dims"), py::arg("attrs") = "")
      .def("constant", [](HloBuilder& b, double v, const std::string& dtype,
                          const std::vector<int64_t>& dims) { return b.constant(v, element_type_from_name(dtype), dims); },
           py::arg("value"), py::arg("dtype"), py::arg("dims") = std::vector<int64_t>{})
      .def("convert", [](HloBuilder& b, const Value& v, const std::string& dtype) {
        return b.convert(v, element_type_from_name(dtype));
      })
      .def("reshape", &HloBuilder::reshape)
      .def("broadcast_to", &HloBuilder::broadcast_to)
      .def("broadcast_in_dim", &HloBuilder::broadcast_in_dim)
      .def("transpose", &HloBuilder::transpose)
      .def("slice", &HloBuilder::slice, py::arg("v"), py::arg("start"), py::arg("limit"),
           py::arg("strides") = std::vector<int64_t>{})
      .def("concatenate", &HloBuilder::concatenate)
      .def("iota", [](HloBuilder& b, const std::string& dtype, const std::vector<int64_t>& dims,
                      int64_t dim) { return b.iota(make_type(dtype, dims), dim); })
      .def("unary", &HloBuilder::unary)
      .def("binary", &HloBuilder::binary)
      .def("compare", &HloBuilder::compare)
      .def("select", &HloBuilder::select)
      .def("dot_general", [](HloBuilder& b, const Value& x, const Value& y, const std::vector<int64_t>& lb,
                             const std::vector<int64_t>& rb, const std::vector<int64_t>& lc,
                             const std::vector<int64_t>& rc, const std::string& dtype, const std::vector<int64_t>& dims) {
        return b.dot_general(x, y, lb, rb, lc, rc, make_type(dtype, dims));
      })
      .def("reduce", &HloBuilder::reduce)
      .def("dynamic_update_slice", &HloBuilder::dynamic_update_slice)
      .def("build", &HloBuilder::build);
}

}  // namespace torch_tpu
