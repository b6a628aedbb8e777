// Host heap policy for plugins whose device memory is host memory (XLA-CPU).
//
// XLA-CPU allocates every buffer and temporary with the C allocator. glibc serves blocks above its mmap threshold
// with fresh mmap()s and returns freed heap tops to the OS, so a training step of a mid-sized model takes tens of
// thousands of page faults re-zeroing memory it had a moment ago. keep_host_heap() asks glibc to keep what it once
// got: one arena, no mmap()ed blocks, no trimming. Host memory then stays at its peak instead of shrinking.
#pragma once

#include <string>

namespace torch_tpu {

struct HostHeapPolicy {
  bool applied = false;  // every setting took
  std::string detail;    // what was set, or why nothing was (not glibc, a refused setting)
};

// Call before the plugin's client starts its threads (arenas are made per thread on first use). Idempotent.
HostHeapPolicy keep_host_heap();

}  // namespace torch_tpu
