#include "runtime/compile_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "runtime/counters.h"

namespace torch_tpu {

CompileCache::CompileCache(std::shared_ptr<Client> client, CompileSettings settings) : client_(std::move(client)) {
  set_settings_locked(settings);
}

void CompileCache::set_settings_locked(const CompileSettings& settings) {
  std::string options = compile_options_bytes(settings);  // throws before anything changes
  settings_ = settings;
  options_ = std::move(options);
  fingerprint_ = stable_hash(options_);
  key_prefix_ = client_->plugin().identity() + "\n" + client_->platform_version() + "\n" + options_ + "\n";
  // Flags the plugins read from the environment change the code they generate: a program compiled under other
  // flags must not be loaded from disk.
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(name);
    key_prefix_ += std::string(name) + "=" + (value ? value : "") + "\n";
  }
}

void CompileCache::set_settings(const CompileSettings& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  set_settings_locked(settings);
}

CompileSettings CompileCache::settings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return settings_;
}

uint64_t CompileCache::options_fingerprint() const { return fingerprint_.load(std::memory_order_acquire); }

// "tpu:<first distinct StableHLO ops>#<hash>": what a profile row or trace slice calls a compiled program.
static std::string program_label(const std::string& mlir) {
  std::vector<std::string> ops;
  const std::string marker = "\"stablehlo.";
  for (size_t pos = mlir.find(marker); pos != std::string::npos && ops.size() < 3; pos = mlir.find(marker, pos + 1)) {
    size_t begin = pos + marker.size();
    size_t end = mlir.find('"', begin);
    if (end == std::string::npos) break;
    std::string op = mlir.substr(begin, end - begin);
    if (op == "constant" || op == "return" || op == "reshape" || op == "broadcast_in_dim" || op == "convert") continue;
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  std::string label = "tpu:";
  for (size_t i = 0; i < ops.size(); ++i) label += (i ? "+" : "") + ops[i];
  if (ops.empty()) label += "copy";
  char hash[16];
  std::snprintf(hash, sizeof(hash), "#%06llx", static_cast<unsigned long long>(stable_hash(mlir) & 0xffffff));
  return label + hash;
}

std::shared_ptr<Executable> CompileCache::get_or_compile(const std::string& mlir) {
  std::string key, options, dump;
  std::promise<std::shared_ptr<Executable>> result;
  {
    std::unique_lock<std::mutex> lock(mu_);
    key = key_prefix_ + mlir;
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      runtime_counters().cache_hits++;
      it->second.stats.read_count++;
      uses_.splice(uses_.begin(), uses_, it->second.use);
      return it->second.executable;
    }
    auto running = inflight_.find(key);
    if (running != inflight_.end()) {
      std::shared_future<std::shared_ptr<Executable>> pending = running->second;
      lock.unlock();
      runtime_counters().cache_hits++;
      return pending.get();  // rethrows the compilation's error
    }
    inflight_.emplace(key, result.get_future().share());
    options = options_;
    dump = dump_directory_;
  }
  try {
    std::shared_ptr<Executable> executable = build(key, mlir, options, dump);
    result.set_value(executable);
    return executable;
  } catch (...) {
    result.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.erase(key);
    throw;
  }
}

std::shared_ptr<Executable> CompileCache::build(const std::string& key, const std::string& mlir,
                                                const std::string& options, const std::string& dump) {
  runtime_counters().cache_misses++;
  if (!dump.empty()) {
    char name[40];
    std::snprintf(name, sizeof(name), "/program-%016llx.mlir", static_cast<unsigned long long>(stable_hash(mlir)));
    std::FILE* f = std::fopen((dump + name).c_str(), "w");
    if (f != nullptr) {
      std::fwrite(mlir.data(), 1, mlir.size(), f);
      std::fclose(f);
    }
  }
  CacheEntryStats stats;
  std::shared_ptr<Executable> executable;
  if (std::optional<std::string> bytes = disk_.load(key)) {
    try {
      executable = client_->deserialize(*bytes);
      runtime_counters().disk_cache_hits++;
      stats.from_disk = true;
    } catch (const Error&) {
      executable = nullptr;  // stale or corrupt entry: compile afresh
    }
  }
  if (!executable) {
    auto start = std::chrono::steady_clock::now();
    executable = client_->compile(mlir, options);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    runtime_counters().compiles++;
    runtime_counters().compile_ns += ns;
    stats.compile_ns = ns;
    try {
      disk_.store(key, executable->serialize());
    } catch (const Error&) {
      // the plugin cannot serialize: memory cache only
    }
  }
  stats.label = program_label(mlir);
  executable->set_label(stats.label);
  std::lock_guard<std::mutex> lock(mu_);
  inflight_.erase(key);
  auto inserted = entries_.emplace(key, Entry{executable, {}, stats});
  if (!inserted.second) return inserted.first->second.executable;  // entered meanwhile (a cleared cache refilled)
  uses_.push_front(&inserted.first->first);
  inserted.first->second.use = uses_.begin();
  trim_locked();
  return executable;
}

uint64_t CompileCache::compile_in_background(const std::string& mlir) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = key_prefix_ + mlir;
  if (entries_.count(key) > 0 || inflight_.count(key) > 0) return 0;
  Job job;
  job.ticket = next_ticket_++;
  job.result = std::make_shared<std::promise<std::shared_ptr<Executable>>>();
  inflight_.emplace(key, job.result->get_future().share());
  job.key = std::move(key);
  job.mlir = mlir;
  job.options = options_;
  job.dump = dump_directory_;
  unfinished_.insert(job.ticket);
  uint64_t ticket = job.ticket;
  jobs_.push_back(std::move(job));
  if (workers_.empty()) {
    // Two threads: a compilation is mostly single-threaded, and the caller keeps tracing the next graph meanwhile.
    unsigned n = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
    for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
  }
  work_.notify_one();
  return ticket;
}

void CompileCache::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left to compile
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job.result->set_value(build(job.key, job.mlir, job.options, job.dump));
    } catch (...) {
      job.result->set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mu_);
      inflight_.erase(job.key);  // forgotten: the next request compiles again and sees the error itself
    }
    std::lock_guard<std::mutex> lock(mu_);
    unfinished_.erase(job.ticket);
    finished_.notify_all();
  }
}

bool CompileCache::background_done(uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mu_);
  return unfinished_.empty() || (ticket != 0 && *unfinished_.begin() > ticket);
}

void CompileCache::wait_background(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  finished_.wait(lock, [&] { return unfinished_.empty() || (ticket != 0 && *unfinished_.begin() > ticket); });
}

uint64_t CompileCache::last_ticket() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ticket_ - 1;
}

size_t CompileCache::background_pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unfinished_.size();
}

CompileCache::~CompileCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void CompileCache::trim_locked() {
  while (capacity_ > 0 && entries_.size() > capacity_) {
    entries_.erase(*uses_.back());
    uses_.pop_back();
    runtime_counters().cache_evictions++;
  }
}

std::vector<CacheEntryStats> CompileCache::entry_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CacheEntryStats> out;
  out.reserve(entries_.size());
  for (const std::string* key : uses_) out.push_back(entries_.at(*key).stats);
  return out;
}

void CompileCache::set_capacity(size_t entries) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = entries;
  trim_locked();
}

size_t CompileCache::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

bool CompileCache::dumping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !dump_directory_.empty();
}

void CompileCache::dump_companion(const std::string& mlir, const std::string& suffix,
                                  const std::string& content) const {
  std::string dump;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dump = dump_directory_;
  }
  if (dump.empty()) return;
  char name[40];
  std::snprintf(name, sizeof(name), "/program-%016llx", static_cast<unsigned long long>(stable_hash(mlir)));
  std::FILE* f = std::fopen((dump + name + suffix).c_str(), "w");
  if (f == nullptr) return;
  std::fwrite(content.data(), 1, content.size(), f);
  std::fclose(f);
}

void CompileCache::set_dump_directory(const std::string& dir) {
  if (!dir.empty()) make_dirs(dir, 0755);
  std::lock_guard<std::mutex> lock(mu_);
  dump_directory_ = dir;
}

std::string CompileCache::set_directory(const std::string& dir) { return disk_.set_directory(dir); }

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void CompileCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  uses_.clear();
}

}  // namespace torch_tpu
