// The compile cache's disk tier: serialized executables as files in one private directory, bounded in size.
//
// Entries are native code the process will run, so the directory is created private (0700) and is refused when it
// belongs to another user or others may write it; an entry file owned by another user or writable by others is
// refused (never loaded), counted in disk_cache_refused and reported once on stderr. Each entry is
// <hash>.pjrt = 8-byte key length, the key (checked on load against hash collisions), the executable's bytes;
// written under a temporary name and renamed, so concurrent processes never read a partial file. A load touches the
// file's modification time: when the directory grows past its limit, the least recently used files are removed
// until it is back under 80% of the limit.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace torch_tpu {

// 64-bit FNV-1a: a stable (cross-process) hash for program text and cache keys.
uint64_t stable_hash(const std::string& text);

// Creates `dir` and its missing parents (parents 0755 less the umask; `dir` itself with `mode`).
void make_dirs(const std::string& dir, mode_t mode);

class DiskCache {
 public:
  // Uses `dir` (created private if missing); empty disables the tier. Returns "" or why `dir` was refused (the
  // tier is then disabled).
  std::string set_directory(const std::string& dir);
  std::string directory() const;

  // Bytes the directory may hold; 0 means no bound. Applies at once.
  void set_limit(uint64_t bytes);
  uint64_t limit() const;

  // The stored bytes for `key`, or nothing (no tier, no entry, another key, or a refused file).
  std::optional<std::string> load(const std::string& key);
  void store(const std::string& key, const std::string& bytes);

  // Removes every entry; returns how many files were removed.
  int64_t clear();
  // Bytes the entries take now (scans the directory).
  uint64_t scan_bytes() const;

 private:
  std::string path_of(const std::string& key) const;
  void trim_locked();

  mutable std::mutex mu_;
  std::string dir_;
  uint64_t limit_ = 0;
  uint64_t bytes_ = 0;  // this process's estimate (a scan at set_directory plus what it stored since)
};

}  // namespace torch_tpu
