// What a program is compiled with: the settings torch_tpu chooses and the options a user asks for, serialized as the
// xla.CompileOptionsProto bytes PJRT_Client_Compile takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace torch_tpu {

// One XLA option's value as a user gives it (torch.tpu.compiler.custom_compiler_options).
using CompilerOption = std::variant<bool, int64_t, double, std::string>;

struct CompileSettings {
  // Portable executables run on any addressable device chosen at execute time.
  bool portable = true;
  // ExecutableBuildOptions.exec_time_optimization_effort: negative trades run time for faster compiles.
  std::optional<float> exec_time_optimization_effort;
  // DebugOptions.xla_allow_excess_precision = false: every float16/bfloat16 value a program computes is rounded to
  // its type, as PyTorch's kernels round each result. XLA's default keeps such intermediates in float32 and
  // silently drops the roundings the lowering rules ask for (a bfloat16 op written to a float32 out=, the per-op
  // rounding between the ops of one fused graph).
  bool exact_reduced_precision = true;
  // Options by name, applied last (a later entry of one name wins). "xla_optimization_level" and
  // "xla_memory_fitting_level" ("O0".."O3") are ExecutableBuildOptions fields; every other name is an XLA
  // DebugOptions field passed through CompileOptions.env_option_overrides, which the plugin validates.
  std::vector<std::pair<std::string, CompilerOption>> overrides;
};

// Protobuf bytes of a CompileOptionsProto with one replica and one partition (never empty: XLA-CPU aborts on that).
// Throws Error(kInvalidArgument) for an effort level other than O0..O3.
std::string compile_options_bytes(const CompileSettings& settings);

}  // namespace torch_tpu
