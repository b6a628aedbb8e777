#include "runtime/compile_options.h"

#include <cstring>
#include <map>

#include "runtime/error.h"

namespace torch_tpu {
namespace {

// Protobuf wire format, the few shapes CompileOptionsProto needs.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, int field, int wire_type) { put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type); }

void put_varint_field(std::string& out, int field, uint64_t v) {
  put_tag(out, field, 0);
  put_varint(out, v);
}

template <typename T>
void put_fixed_field(std::string& out, int field, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  put_tag(out, field, sizeof(T) == 4 ? 5 : 1);
  char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  out.append(raw, sizeof(T));
}

// A length-delimited field: tag, size, bytes (an embedded message or a string).
void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// xla.ExecutionOptions.EffortLevel of "O0".."O3".
uint64_t effort_level(const std::string& name, const CompilerOption& value) {
  const std::string* level = std::get_if<std::string>(&value);
  static const std::map<std::string, uint64_t> levels = {{"O0", 9}, {"O1", 19}, {"O2", 29}, {"O3", 39}};
  auto it = level ? levels.find(*level) : levels.end();
  if (it == levels.end()) {
    fail(ErrorCode::kInvalidArgument, "compile_options_bytes",
         name + " must be one of 'O0', 'O1', 'O2', 'O3'");
  }
  return it->second;
}

// OptionOverrideProto: string_field = 1, bool_field = 2, int_field = 3, double_field = 4.
std::string option_override(const CompilerOption& value) {
  std::string out;
  if (const bool* b = std::get_if<bool>(&value)) {
    put_varint_field(out, 2, *b ? 1 : 0);
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    put_varint_field(out, 3, static_cast<uint64_t>(*i));
  } else if (const double* d = std::get_if<double>(&value)) {
    put_fixed_field(out, 4, *d);
  } else {
    put_bytes_field(out, 1, std::get<std::string>(value));
  }
  return out;
}

}  // namespace

std::string compile_options_bytes(const CompileSettings& settings) {
  // The last value of each name wins; env_option_overrides is a map, written in name order.
  std::map<std::string, CompilerOption> env;
  if (settings.exact_reduced_precision) env["xla_allow_excess_precision"] = false;
  std::optional<uint64_t> optimization_level, memory_fitting_level;
  for (const auto& [name, value] : settings.overrides) {
    if (name == "xla_optimization_level") {
      optimization_level = effort_level(name, value);
    } else if (name == "xla_memory_fitting_level") {
      memory_fitting_level = effort_level(name, value);
    } else {
      env[name] = value;
    }
  }

  std::string build;  // ExecutableBuildOptionsProto
  put_varint_field(build, 4, 1);  // num_replicas
  put_varint_field(build, 5, 1);  // num_partitions
  if (settings.exec_time_optimization_effort) put_fixed_field(build, 20, *settings.exec_time_optimization_effort);
  if (optimization_level) put_varint_field(build, 24, *optimization_level);
  if (memory_fitting_level) put_varint_field(build, 25, *memory_fitting_level);

  std::string out;  // CompileOptionsProto
  put_bytes_field(out, 3, build);  // executable_build_options
  if (settings.portable) put_varint_field(out, 4, 1);  // compile_portable_executable
  for (const auto& [name, value] : env) {  // env_option_overrides: map entries {key = 1, value = 2}
    std::string entry;
    put_bytes_field(entry, 1, name);
    put_bytes_field(entry, 2, option_override(value));
    put_bytes_field(out, 7, entry);
  }
  return out;
}

}  // namespace torch_tpu
