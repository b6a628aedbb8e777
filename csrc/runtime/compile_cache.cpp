#include "runtime/compile_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/counters.h"

namespace torch_tpu {
namespace {

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

// A length-delimited field: tag, size, bytes (an embedded message or a string).
void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void make_dirs(const std::string& dir) {
  std::string partial;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    ::mkdir(partial.c_str(), 0755);
  }
}

}  // namespace

std::string compile_options_bytes(const CompileSettings& settings) {
  std::string build;  // ExecutableBuildOptionsProto
  put_varint_field(build, 4, 1);  // num_replicas
  put_varint_field(build, 5, 1);  // num_partitions
  if (settings.exec_time_optimization_effort) {
    put_tag(build, 20, 5);  // float, fixed32
    float f = *settings.exec_time_optimization_effort;
    char raw[4];
    std::memcpy(raw, &f, 4);
    build.append(raw, 4);
  }
  std::string out;  // CompileOptionsProto
  put_bytes_field(out, 3, build);  // executable_build_options
  if (settings.portable) put_varint_field(out, 4, 1);  // compile_portable_executable
  if (settings.exact_reduced_precision) {
    // env_option_overrides (map<string, OptionOverrideProto>): one entry {key = 1, value = 2 {bool_field = 2}}.
    std::string value;
    put_varint_field(value, 2, 0);  // bool_field = false
    std::string entry;
    put_bytes_field(entry, 1, "xla_allow_excess_precision");
    put_bytes_field(entry, 2, value);
    put_bytes_field(out, 7, entry);
  }
  return out;
}

uint64_t stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

CompileCache::CompileCache(std::shared_ptr<Client> client, CompileSettings settings)
    : client_(std::move(client)), options_(compile_options_bytes(settings)) {
  key_prefix_ = client_->plugin().identity() + "\n" + client_->platform_version() + "\n" + options_ + "\n";
  // Flags the plugins read from the environment change the code they generate: a program compiled under other
  // flags must not be loaded from disk.
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(name);
    key_prefix_ += std::string(name) + "=" + (value ? value : "") + "\n";
  }
}

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
  std::string key = key_prefix_ + mlir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      runtime_counters().cache_hits++;
      uses_.splice(uses_.begin(), uses_, it->second.use);
      return it->second.executable;
    }
  }
  runtime_counters().cache_misses++;
  std::string dump;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dump = dump_directory_;
  }
  if (!dump.empty()) {
    char name[40];
    std::snprintf(name, sizeof(name), "/program-%016llx.mlir", static_cast<unsigned long long>(stable_hash(mlir)));
    std::FILE* f = std::fopen((dump + name).c_str(), "w");
    if (f != nullptr) {
      std::fwrite(mlir.data(), 1, mlir.size(), f);
      std::fclose(f);
    }
  }
  std::shared_ptr<Executable> executable = load_from_disk(key);
  if (executable) {
    runtime_counters().disk_cache_hits++;
  } else {
    auto start = std::chrono::steady_clock::now();
    executable = client_->compile(mlir, options_);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    runtime_counters().compiles++;
    runtime_counters().compile_ns += ns;
    store_to_disk(key, *executable);
  }
  executable->set_label(program_label(mlir));
  std::lock_guard<std::mutex> lock(mu_);
  auto inserted = entries_.emplace(std::move(key), Entry{executable, {}});
  if (!inserted.second) return inserted.first->second.executable;  // another thread compiled it meanwhile
  uses_.push_front(&inserted.first->first);
  inserted.first->second.use = uses_.begin();
  while (capacity_ > 0 && entries_.size() > capacity_) {
    entries_.erase(*uses_.back());
    uses_.pop_back();
    runtime_counters().cache_evictions++;
  }
  return executable;
}

void CompileCache::set_capacity(size_t entries) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = entries;
  while (capacity_ > 0 && entries_.size() > capacity_) {
    entries_.erase(*uses_.back());
    uses_.pop_back();
    runtime_counters().cache_evictions++;
  }
}

size_t CompileCache::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

void CompileCache::set_dump_directory(const std::string& dir) {
  if (!dir.empty()) make_dirs(dir);
  std::lock_guard<std::mutex> lock(mu_);
  dump_directory_ = dir;
}

void CompileCache::set_directory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  directory_ = dir;
  if (!dir.empty()) make_dirs(dir);
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void CompileCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  uses_.clear();
}

std::string CompileCache::disk_path(const std::string& key) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.pjrt", static_cast<unsigned long long>(stable_hash(key)));
  return directory_ + "/" + name;
}

// File layout: 8-byte key length, the key itself (checked on load against hash collisions), serialized executable.
std::shared_ptr<Executable> CompileCache::load_from_disk(const std::string& key) const {
  if (directory_.empty()) return nullptr;
  std::ifstream in(disk_path(key), std::ios::binary);
  if (!in) return nullptr;
  uint64_t key_size = 0;
  in.read(reinterpret_cast<char*>(&key_size), sizeof(key_size));
  if (!in || key_size != key.size()) return nullptr;
  std::string stored_key(key_size, '\0');
  in.read(&stored_key[0], static_cast<std::streamsize>(key_size));
  if (!in || stored_key != key) return nullptr;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return client_->deserialize(bytes);
  } catch (const Error&) {
    return nullptr;  // stale or corrupt entry: compile afresh
  }
}

void CompileCache::store_to_disk(const std::string& key, const Executable& executable) const {
  if (directory_.empty()) return;
  std::string bytes;
  try {
    bytes = executable.serialize();
  } catch (const Error&) {
    return;  // plugin cannot serialize: memory cache only
  }
  // Write to a private temporary name, then rename: concurrent processes never read a partial file.
  std::string path = disk_path(key);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    uint64_t key_size = key.size();
    out.write(reinterpret_cast<const char*>(&key_size), sizeof(key_size));
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  ::rename(tmp.c_str(), path.c_str());
}

}  // namespace torch_tpu
