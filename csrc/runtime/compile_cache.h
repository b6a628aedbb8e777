// The compile cache every execution mode shares: executables by program text and compile options, in memory
// (bounded, least recently used dropped) and on disk (runtime/disk_cache.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
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
  // Waits for the compilations still running in the background (a program being compiled cannot be abandoned).
  ~CompileCache();
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  // Returns the executable for `mlir` under the current settings, compiling it (or loading it from the disk cache)
  // on a miss. A program another thread (or the background) is compiling is waited for, not compiled twice.
  std::shared_ptr<Executable> get_or_compile(const std::string& mlir);

  // Compiling ahead of use (torch.compile's async_compile): `mlir` is compiled under the current settings on a
  // background thread, and get_or_compile of the same program waits for it. Returns the job's ticket (increasing),
  // or 0 when the program is cached or already being compiled. A compilation that fails is forgotten: the program's
  // next get_or_compile compiles it again and raises there.
  uint64_t compile_in_background(const std::string& mlir);
  // Whether every background job up to `ticket` (0: every job) has finished; waiting blocks until they have.
  bool background_done(uint64_t ticket) const;
  void wait_background(uint64_t ticket);
  // The newest ticket handed out (0: none yet) and how many jobs are unfinished.
  uint64_t last_ticket() const;
  size_t background_pending() const;

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

  // Programs being compiled, by key: a second request waits for the first.
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<Executable>>> inflight_;
  struct Job {
    uint64_t ticket = 0;
    std::string key, mlir, options, dump;
    std::shared_ptr<std::promise<std::shared_ptr<Executable>>> result;
  };
  std::deque<Job> jobs_;
  std::set<uint64_t> unfinished_;  // tickets of queued and running jobs
  uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  std::condition_variable work_, finished_;
  std::vector<std::thread> workers_;  // started with the first background job

  void set_settings_locked(const CompileSettings& settings);
  void trim_locked();
  void work();
  // Compiles (or loads from disk) `mlir` under `options` and enters it as `key`; called without the lock.
  std::shared_ptr<Executable> build(const std::string& key, const std::string& mlir, const std::string& options,
                                    const std::string& dump);
};

}  // namespace torch_tpu
