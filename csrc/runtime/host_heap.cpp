#include "runtime/host_heap.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace torch_tpu {

HostHeapPolicy keep_host_heap() {
  HostHeapPolicy out;
#if defined(__GLIBC__)
  struct Setting {
    int param;
    int value;
    const char* name;
  };
  // Values: one shared arena; never mmap() a block; trim only when 1 GiB lies free at the top; grow the heap in 256 MiB
  // steps. mallopt() returns 1 on success.
  constexpr int kTrimThreshold = 1 << 30;  // the parameter is an int: 1 GiB is the largest round value
  const Setting settings[] = {
      {M_ARENA_MAX, 1, "arena_max=1"},
      {M_MMAP_MAX, 0, "mmap_max=0"},
      {M_TRIM_THRESHOLD, kTrimThreshold, "trim_threshold=1GiB"},
      {M_TOP_PAD, 256 << 20, "top_pad=256MiB"},
  };
  out.applied = true;
  for (const Setting& s : settings) {
    const bool ok = mallopt(s.param, s.value) == 1;
    out.applied = out.applied && ok;
    out.detail += std::string(out.detail.empty() ? "" : ", ") + s.name + (ok ? "" : " (refused)");
  }
#else
  out.detail = "not glibc: the C allocator keeps its own policy";
#endif
  return out;
}

}  // namespace torch_tpu
