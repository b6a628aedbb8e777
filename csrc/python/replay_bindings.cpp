// Python view of compiled-graph capture and replay (exec/replay.h), used by torch_tpu/compile/replay.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "exec/recording.h"
#include "exec/replay.h"
#include "python/module.h"

namespace py = pybind11;

namespace torch_tpu {
namespace {

// Call arguments and results as the capture compares them: tensors, numbers, None; anything else is named by
// its Python type (and refused).
std::vector<c10::IValue> to_values(const py::handle& seq) {
  std::vector<c10::IValue> out;
  for (const py::handle& item : py::reinterpret_borrow<py::sequence>(seq)) {
    PyObject* o = item.ptr();
    if (o == Py_None) {
      out.emplace_back();
    } else if (THPVariable_Check(o)) {
      out.emplace_back(THPVariable_Unpack(o));
    } else if (PyBool_Check(o)) {
      out.emplace_back(o == Py_True);
    } else if (PyLong_Check(o)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow != 0) {
        out.emplace_back(std::string("int out of range"));
      } else {
        out.emplace_back(static_cast<int64_t>(v));
      }
    } else if (PyFloat_Check(o)) {
      out.emplace_back(PyFloat_AsDouble(o));
    } else {
      out.emplace_back(std::string(Py_TYPE(o)->tp_name));
    }
  }
  return out;
}

py::list to_list(const std::vector<c10::IValue>& values) {
  py::list out;
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(v.toTensor())));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

}  // namespace

void bind_replay(py::module_& m) {
  py::class_<CapturedGraph, std::shared_ptr<CapturedGraph>>(m, "CapturedGraph")
      .def_property_readonly("device", &CapturedGraph::device)
      .def(
          "replay",
          [](const CapturedGraph& g, const py::sequence& args) -> py::object {
            std::optional<std::vector<c10::IValue>> outs = g.replay(to_values(args));
            if (!outs) return py::none();
            return to_list(*outs);
          },
          "The outputs of one call on `args`, or None when they do not match the capture.")
      .def(
          "program",
          [](const CapturedGraph& g) {
            CapturedGraph::Program p = g.program();
            py::list outputs;
            for (const CapturedGraph::OutputView& v : g.output_views()) {
              py::dict o;
              o["kind"] = v.none ? "none" : v.fresh ? "fresh" : "input";
              o["index"] = v.index;
              o["dtype"] = v.dtype;
              o["sizes"] = v.sizes;
              o["strides"] = v.strides;
              o["offset"] = v.offset;
              outputs.append(o);
            }
            py::dict d;
            d["text"] = p.text;
            d["arg_inputs"] = p.arg_inputs;
            d["fixed_args"] = p.fixed_args;  // Buffers (None where the argument is an input)
            d["results"] = p.results;
            d["checks"] = p.checks;
            d["outputs"] = outputs;
            return d;
          },
          "What torch.export reads: the program text, what its arguments and results are, and the outputs.");
  m.def("_capture_begin", &begin_capture, py::arg("device"));
  m.def(
      "_capture_end",
      [](int device, uint64_t token, const py::sequence& inputs, const py::object& outputs,
         bool compile_only) -> py::tuple {
        std::shared_ptr<CapturedGraph> graph;
        std::string why = "the call ran or lowered ops outside the recording";
        if (outputs.is_none()) {  // the call raised: its ops stay in the open graph
          end_capture(device, token, {});
          return py::make_tuple(py::none(), std::string("the call raised"));
        }
        std::vector<c10::IValue> in = to_values(inputs), out = to_values(outputs);
        end_capture(device, token,
                    [&](Recording& rec) { graph = CapturedGraph::capture(device, rec, in, out, &why, compile_only); });
        if (graph) why.clear();
        return py::make_tuple(graph ? py::cast(graph) : py::none(), why);
      },
      py::arg("device"), py::arg("token"), py::arg("inputs"), py::arg("outputs"), py::arg("compile_only") = false,
      "Ends a capture: (the CapturedGraph, \"\") or (None, why it was refused). `compile_only`: compile the program in "
      "the background and do not run it (the call's results are never computed).");
}

}  // namespace torch_tpu
