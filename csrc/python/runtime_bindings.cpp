// Python view of runtime/: enough for tests, the device report and the PyTorch glue above it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/module.h"
#include "runtime/client.h"
#include "runtime/compile_cache.h"
#include "runtime/counters.h"
#include "runtime/executable.h"
#include "runtime/host_heap.h"

namespace py = pybind11;

namespace torch_tpu {
namespace {

std::vector<CreateOption> options_from_dict(const py::dict& options) {
  std::vector<CreateOption> out;
  for (auto item : options) {
    CreateOption o;
    o.name = py::cast<std::string>(item.first);
    py::handle v = item.second;
    if (py::isinstance<py::bool_>(v)) {
      o.value = v.cast<bool>();
    } else if (py::isinstance<py::int_>(v)) {
      o.value = v.cast<int64_t>();
    } else if (py::isinstance<py::float_>(v)) {
      o.value = v.cast<float>();
    } else if (py::isinstance<py::str>(v)) {
      o.value = v.cast<std::string>();
    } else {
      o.value = v.cast<std::vector<int64_t>>();
    }
    out.push_back(std::move(o));
  }
  return out;
}

py::dict device_dict(const DeviceInfo& d) {
  py::dict out;
  out["index"] = d.index;
  out["id"] = d.id;
  out["local_hardware_id"] = d.local_hardware_id;
  out["kind"] = d.kind;
  out["description"] = d.description;
  out["attributes"] = d.attributes;
  return out;
}

py::dict memory_dict(const MemoryStats& s) {
  py::dict out;
  out["available"] = s.available;
  out["bytes_in_use"] = s.bytes_in_use;
  out["peak_bytes_in_use"] = s.peak_bytes_in_use ? py::cast(*s.peak_bytes_in_use) : py::none();
  out["bytes_limit"] = s.bytes_limit ? py::cast(*s.bytes_limit) : py::none();
  out["num_allocs"] = s.num_allocs ? py::cast(*s.num_allocs) : py::none();
  out["bytes_reserved"] = s.bytes_reserved ? py::cast(*s.bytes_reserved) : py::none();
  return out;
}

std::shared_ptr<Buffer> buffer_from_python(const Client& client, const py::buffer& data, const std::string& dtype,
                                           int device) {
  py::buffer_info info = data.request();
  ElementType type = element_type_from_name(dtype);
  if (info.itemsize != element_size(type)) {
    fail(ErrorCode::kInvalidArgument, "buffer_from_host",
         "host items are " + std::to_string(info.itemsize) + " bytes but " + dtype + " needs " +
             std::to_string(element_size(type)));
  }
  std::vector<int64_t> dims(info.shape.begin(), info.shape.end());
  std::vector<int64_t> strides(info.strides.begin(), info.strides.end());
  py::gil_scoped_release release;
  return client.buffer_from_host(info.ptr, type, dims, strides, device);
}

py::bytes buffer_to_bytes(const Buffer& buffer) {
  std::string out(static_cast<size_t>(buffer.byte_size()), '\0');
  {
    py::gil_scoped_release release;
    buffer.to_host(out.data(), out.size());
  }
  return py::bytes(out);
}

std::vector<std::shared_ptr<Buffer>> execute(const Executable& exe, const Client& client,
                                             const std::vector<std::shared_ptr<Buffer>>& args, int device,
                                             const std::vector<int64_t>& non_donatable) {
  std::vector<Buffer*> raw;
  for (const auto& a : args) raw.push_back(a.get());
  py::gil_scoped_release release;
  ExecuteResult result = exe.execute(raw, client.device(device).raw, non_donatable);
  result.done.await();
  return result.outputs;
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<Buffer, std::shared_ptr<Buffer>>(m, "Buffer")
      .def_property_readonly("dtype", [](const Buffer& b) { return element_type_name(b.element_type()); })
      .def_property_readonly("dims", &Buffer::dims)
      .def_property_readonly("byte_size", &Buffer::byte_size)
      .def("on_device_size", &Buffer::on_device_size)
      .def("to_bytes", &buffer_to_bytes)
      .def("is_deleted", &Buffer::is_deleted)
      .def("delete", &Buffer::release_device_memory)
      .def("await_ready", &Buffer::await_ready, py::call_guard<py::gil_scoped_release>());

  py::class_<Executable, std::shared_ptr<Executable>>(m, "Executable")
      .def_property_readonly("num_outputs", &Executable::num_outputs)
      .def("serialize", [](const Executable& e) { return py::bytes(e.serialize()); });

  py::class_<Client, std::shared_ptr<Client>>(m, "Client")
      .def_static(
          "create",
          [](const std::string& plugin_path, const py::dict& options) {
            auto opts = options_from_dict(options);
            py::gil_scoped_release release;
            return Client::create(Plugin::load(plugin_path), opts);
          },
          py::arg("plugin_path"), py::arg("options") = py::dict())
      .def_property_readonly("platform_name", &Client::platform_name)
      .def_property_readonly("platform_version", &Client::platform_version)
      .def_property_readonly("plugin_path", [](const Client& c) { return c.plugin().path(); })
      .def_property_readonly("plugin_attributes", [](const Client& c) { return c.plugin().attributes(); })
      .def_property_readonly("api_version",
                             [](const Client& c) {
                               return std::to_string(c.plugin().major_version()) + "." +
                                      std::to_string(c.plugin().minor_version());
                             })
      .def("devices",
           [](const Client& c) {
             py::list out;
             for (const auto& d : c.devices()) out.append(device_dict(d));
             return out;
           })
      .def("memory_stats", [](const Client& c, int i) { return memory_dict(c.memory_stats(i)); })
      .def("buffer_from_host", &buffer_from_python, py::arg("data"), py::arg("dtype"), py::arg("device") = 0)
      .def("compile", &Client::compile, py::arg("mlir"), py::arg("options"), py::call_guard<py::gil_scoped_release>())
      .def("deserialize", [](const Client& c, const std::string& bytes) { return c.deserialize(bytes); })
      .def(
          "execute",
          [](const Client& c, const Executable& e, const std::vector<std::shared_ptr<Buffer>>& args, int device,
             const std::vector<int64_t>& non_donatable) { return execute(e, c, args, device, non_donatable); },
          py::arg("executable"), py::arg("args"), py::arg("device") = 0,
          py::arg("non_donatable") = std::vector<int64_t>{});

  py::class_<CompileCache, std::shared_ptr<CompileCache>>(m, "CompileCache")
      .def(py::init([](std::shared_ptr<Client> client, py::object effort) {
             CompileSettings settings;
             if (!effort.is_none()) settings.exec_time_optimization_effort = effort.cast<float>();
             return std::make_shared<CompileCache>(std::move(client), settings);
           }),
           py::arg("client"), py::arg("exec_time_optimization_effort") = py::none())
      .def("get_or_compile", &CompileCache::get_or_compile, py::call_guard<py::gil_scoped_release>())
      .def("compile_in_background", &CompileCache::compile_in_background, py::arg("mlir"),
           "Compiles the program on a background thread; its ticket, or 0 when cached or already compiling.")
      .def("background_done", &CompileCache::background_done, py::arg("ticket") = 0)
      .def("wait_background", &CompileCache::wait_background, py::arg("ticket") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("last_ticket", &CompileCache::last_ticket)
      .def_property_readonly("background_pending", &CompileCache::background_pending)
      .def("set_directory", &CompileCache::set_directory)
      .def("set_dump_directory", &CompileCache::set_dump_directory)
      .def_property_readonly("directory", &CompileCache::directory)
      .def("__len__", &CompileCache::size)
      .def_property("capacity", &CompileCache::capacity, &CompileCache::set_capacity)
      .def("clear", &CompileCache::clear)
      .def_property(
          "allow_excess_precision", [](const CompileCache& c) { return !c.settings().exact_reduced_precision; },
          [](CompileCache& c, bool allow) {
            CompileSettings s = c.settings();
            s.exact_reduced_precision = !allow;
            c.set_settings(s);
          })
      .def_property(
          "option_overrides",
          [](const CompileCache& c) {
            py::list out;
            for (const auto& [name, value] : c.settings().overrides) {
              py::object v = std::visit([](const auto& x) { return py::cast(x); }, value);
              out.append(py::make_tuple(name, v));
            }
            return out;
          },
          [](CompileCache& c, const std::vector<std::pair<std::string, py::object>>& items) {
            CompileSettings s = c.settings();
            s.overrides.clear();
            for (const auto& [name, v] : items) {
              if (py::isinstance<py::bool_>(v)) {
                s.overrides.emplace_back(name, v.cast<bool>());
              } else if (py::isinstance<py::int_>(v)) {
                s.overrides.emplace_back(name, v.cast<int64_t>());
              } else if (py::isinstance<py::float_>(v)) {
                s.overrides.emplace_back(name, v.cast<double>());
              } else if (py::isinstance<py::str>(v)) {
                s.overrides.emplace_back(name, v.cast<std::string>());
              } else {
                throw py::type_error("compiler option " + name + " must be a bool, int, float or str, not " +
                                     std::string(py::str(v.get_type().attr("__name__"))));
              }
            }
            c.set_settings(s);
          })
      .def("options_fingerprint", &CompileCache::options_fingerprint)
      .def("entry_stats",
           [](const CompileCache& c) {
             py::list out;
             for (const CacheEntryStats& e : c.entry_stats()) {
               py::dict d;
               d["label"] = e.label;
               d["read_count"] = e.read_count;
               d["compilation_duration"] = static_cast<double>(e.compile_ns) / 1e9;
               d["from_disk"] = e.from_disk;
               out.append(d);
             }
             return out;
           })
      .def_property(
          "disk_limit", [](CompileCache& c) { return c.disk().limit(); },
          [](CompileCache& c, uint64_t bytes) { c.disk().set_limit(bytes); })
      .def("disk_bytes", [](CompileCache& c) { return c.disk().scan_bytes(); })
      .def("clear_disk", [](CompileCache& c) { return c.disk().clear(); });

  m.def("compile_options_bytes", [](bool portable, py::object effort) {
    CompileSettings s;
    s.portable = portable;
    if (!effort.is_none()) s.exec_time_optimization_effort = effort.cast<float>();
    return py::bytes(compile_options_bytes(s));
  }, py::arg("portable") = true, py::arg("exec_time_optimization_effort") = py::none());
  m.def("keep_host_heap", []() {
    const HostHeapPolicy p = keep_host_heap();
    return py::make_tuple(p.applied, p.detail);
  });
  m.def("runtime_counters", []() { return runtime_counters().snapshot(); });
  m.def("pjrt_header_version", []() { return std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR); });
}

}  // namespace torch_tpu
