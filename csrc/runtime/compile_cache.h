// Compile options (serialized xla.CompileOptionsProto) and the compile cache every execution mode shares.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/client.h"
#include "runtime/executable.h"

namespace torch_tpu {

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
};

// Protobuf bytes of a CompileOptionsProto with one replica and one partition (never empty: XLA-CPU aborts on that).
std::string compile_options_bytes(const CompileSettings& settings);

// 64-bit FNV-1a: a stable (cross-process) hash for program text.
uint64_t stable_hash(const std::string& text);

class CompileCache {
 public:
  CompileCache(std::shared_ptr<Client> client, CompileSettings settings);

  // Returns the executable for `mlir`, compiling it (or loading it from the disk cache) on a miss.
  std::shared_ptr<Executable> get_or_compile(const std::string& mlir);

  // Persists compiled executables as files under `dir` (created if missing); empty disables the disk cache.
  void set_directory(const std::string& dir);
  const std::string& directory() const { return directory_; }
  // Writes the StableHLO text of every program compiled (or loaded) from now on under `dir` (TORCH_TPU_DUMP_DIR).
  void set_dump_directory(const std::string& dir);

  size_t size() const;
  void clear();
  // The most executables kept in memory; the least recently used beyond it are dropped (each loaded executable
  // maps code pages, and a process has a bounded number of mappings). 0 means no bound.
  void set_capacity(size_t entries);
  size_t capacity() const;

 private:
  std::shared_ptr<Executable> load_from_disk(const std::string& key) const;
  void store_to_disk(const std::string& key, const Executable& executable) const;
  std::string disk_path(const std::string& key) const;

  std::shared_ptr<Client> client_;
  std::string options_;
  std::string key_prefix_;
  std::string directory_;
  std::string dump_directory_;
  mutable std::mutex mu_;
  struct Entry {
    std::shared_ptr<Executable> executable;
    std::list<const std::string*>::iterator use;  // position in uses_
  };
  std::unordered_map<std::string, Entry> entries_;
  std::list<const std::string*> uses_;  // keys of entries_, most recently used first
  size_t capacity_ = 1024;
};

}  // namespace torch_tpu
