#include "runtime/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

#include "runtime/counters.h"

namespace torch_tpu {
namespace {

constexpr const char* kSuffix = ".pjrt";

bool has_suffix(const std::string& name) {
  size_t n = std::strlen(kSuffix);
  return name.size() > n && name.compare(name.size() - n, n, kSuffix) == 0;
}

// Why a file or directory must not be trusted with native code: another owner, or writable by group or others.
std::string untrusted(const struct stat& st) {
  if (st.st_uid != ::geteuid()) return "it belongs to uid " + std::to_string(st.st_uid) + ", not this user";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "others may write it";
  return "";
}

struct FileInfo {
  std::string path;
  uint64_t bytes;
  int64_t mtime_ns;
};

std::vector<FileInfo> list_entries(const std::string& dir) {
  std::vector<FileInfo> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return files;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (!has_suffix(name)) continue;
    std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    files.push_back({path, static_cast<uint64_t>(st.st_size), mtime});
  }
  ::closedir(d);
  return files;
}

// Reads all of `fd` from its current offset.
bool read_all(int fd, char* out, size_t n) {
  while (n > 0) {
    ssize_t got = ::read(fd, out, n);
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t put = ::write(fd, data, n);
    if (put <= 0) return false;
    data += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

}  // namespace

void make_dirs(const std::string& dir, mode_t mode) {
  std::string partial = !dir.empty() && dir[0] == '/' ? "/" : "";
  std::stringstream ss(dir);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '/')) {
    if (!part.empty()) parts.push_back(part);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    partial += parts[i] + "/";
    ::mkdir(partial.c_str(), i + 1 == parts.size() ? mode : 0755);
  }
}

uint64_t stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string DiskCache::set_directory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  dir_.clear();
  bytes_ = 0;
  if (dir.empty()) return "";
  make_dirs(dir, 0700);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return "cannot create the directory " + dir + ": " + std::strerror(errno);
  }
  std::string why = untrusted(st);
  if (!why.empty()) return "the directory " + dir + " is not private: " + why;
  if ((st.st_mode & 077) != 0) ::chmod(dir.c_str(), 0700);  // ours but readable by others (an older torch_tpu made it)
  dir_ = dir;
  for (const FileInfo& f : list_entries(dir_)) bytes_ += f.bytes;
  trim_locked();
  return "";
}

std::string DiskCache::directory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dir_;
}

void DiskCache::set_limit(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
  trim_locked();
}

uint64_t DiskCache::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

std::string DiskCache::path_of(const std::string& key) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx%s", static_cast<unsigned long long>(stable_hash(key)), kSuffix);
  return dir_ + "/" + name;
}

std::optional<std::string> DiskCache::load(const std::string& key) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dir_.empty()) return std::nullopt;
    path = path_of(key);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> result;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    std::string why = untrusted(st);
    if (!why.empty()) {
      runtime_counters().disk_cache_refused++;
      static std::mutex reported_mu;
      static std::set<std::string> reported;
      std::lock_guard<std::mutex> lock(reported_mu);
      if (reported.insert(path).second) {
        std::fprintf(stderr, "torch_tpu: warning: not loading the compile cache entry %s: %s\n", path.c_str(),
                     why.c_str());
      }
    } else {
      uint64_t key_size = 0;
      std::string stored;
      if (read_all(fd, reinterpret_cast<char*>(&key_size), sizeof(key_size)) && key_size == key.size()) {
        stored.resize(key_size);
        if (read_all(fd, stored.data(), key_size) && stored == key) {
          size_t rest = static_cast<size_t>(st.st_size) - sizeof(key_size) - key_size;
          std::string bytes(rest, '\0');
          if (read_all(fd, bytes.data(), rest)) result = std::move(bytes);
        }
      }
      if (result) ::futimens(fd, nullptr);  // most recently used now
    }
  }
  ::close(fd);
  return result;
}

void DiskCache::store(const std::string& key, const std::string& bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir_.empty()) return;
  std::string path = path_of(key);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  uint64_t key_size = key.size();
  bool ok = write_all(fd, reinterpret_cast<const char*>(&key_size), sizeof(key_size)) &&
            write_all(fd, key.data(), key.size()) && write_all(fd, bytes.data(), bytes.size());
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  bytes_ += sizeof(key_size) + key.size() + bytes.size();
  trim_locked();
}

void DiskCache::trim_locked() {
  if (dir_.empty() || limit_ == 0 || bytes_ <= limit_) return;
  std::vector<FileInfo> files = list_entries(dir_);
  std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) { return a.mtime_ns < b.mtime_ns; });
  uint64_t total = 0;
  for (const FileInfo& f : files) total += f.bytes;
  uint64_t target = limit_ / 10 * 8;
  for (const FileInfo& f : files) {
    if (total <= target) break;
    if (::unlink(f.path.c_str()) == 0) {
      total -= f.bytes;
      runtime_counters().disk_cache_evictions++;
    }
  }
  bytes_ = total;
}

int64_t DiskCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t removed = 0;
  if (dir_.empty()) return 0;
  for (const FileInfo& f : list_entries(dir_)) removed += ::unlink(f.path.c_str()) == 0 ? 1 : 0;
  bytes_ = 0;
  return removed;
}

uint64_t DiskCache::scan_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  if (dir_.empty()) return 0;
  for (const FileInfo& f : list_entries(dir_)) total += f.bytes;
  return total;
}

}  // namespace torch_tpu
