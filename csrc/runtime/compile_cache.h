// The compile cache every execution mode shares: executables by program text and compile options, in memory
// (bounded, least recently used dropped) and on disk (runtime/disk_cache.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/client.h"
#include "runtime/compile_options.h"
#include "runtime/disk_cache.h"
#include "runtime/executable.h"

namespace torch_tpu {

// What one in-memory entry has cost and served (torch.tpu._get_cache_stats()).
struct CacheEntryStats {
  std::string label;        // "tpu:<first ops>#<hash>", as profiles name the program
  int64_t read_count = 0;   // requests it answered after the one that made it
  int64_t compile_ns = 0;   // compile time (0 when it was loaded from disk)
  bool from_disk = false;
};

class CompileCache {
 public:
  CompileCache(std::shared_ptr<Client> client, CompileSettings settings);

  // Returns the executable for `mlir` under the current settings, compiling it (or loading it from the disk cache)
  // on a miss.
  std::shared_ptr<Executable> get_or_compile(const std::string& mlir);

  // The settings programs compile with from now on (the options are part of every key: programs compiled under
  // other settings stay cached for when those come back).
  void set_settings(const CompileSettings& settings);
  CompileSettings settings() const;
  // A stable hash of the current compile options: what a cache of compiled programs keyed elsewhere must include.
  uint64_t options_fingerprint() const;

  // Persists compiled executables under `dir` (created private if missing); empty disables the disk cache.
  // Returns "" or why `dir` was refused (then the disk cache is off).
  std::string set_directory(const std::string& dir);
  std::string directory() const { return disk_.directory(); }
  DiskCache& disk() { return disk_; }
  // Writes the StableHLO text of every program compiled (or loaded) from now on under `dir` (TORCH_TPU_DUMP_DIR).
  void set_dump_directory(const std::string& dir);
  bool dumping() const;
  // Next to the dumped program `mlir` (program-<hash>.mlir), a file program-<hash><suffix> holding `content` (what
  // the program was lowered from); nothing when no dump directory is set.
  void dump_companion(const std::string& mlir, const std::string& suffix, const std::string& content) const;

  size_t size() const;
  void clear();
  std::vector<CacheEntryStats> entry_stats() const;
  // The most executables kept in memory; the least recently used beyond it are dropped (each loaded executable
  // maps code pages, and a process has a bounded number of mappings). 0 means no bound.
  void set_capacity(size_t entries);
  size_t capacity() const;

 private:
  std::shared_ptr<Client> client_;
  DiskCache disk_;
  mutable std::mutex mu_;
  CompileSettings settings_;
  std::string options_;     // compile_options_bytes(settings_)
  std::atomic<uint64_t> fingerprint_{0};  // stable_hash(options_): read on every graph run, without the lock
  std::string key_prefix_;  // plugin, platform version, options, flags from the environment
  std::string dump_directory_;
  struct Entry {
    std::shared_ptr<Executable> executable;
    std::list<const std::string*>::iterator use;  // position in uses_
    CacheEntryStats stats;
  };
  std::unordered_map<std::string, Entry> entries_;
  std::list<const std::string*> uses_;  // keys of entries_, most recently used first
  size_t capacity_ = 1024;

  void set_settings_locked(const CompileSettings& settings);
  void trim_locked();
};

}  // namespace torch_tpu
