// Process-wide runtime counters. Tests assert on them (no leaked buffers, cache hits), metrics() reports them.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu {

struct RuntimeCounters {
  std::atomic<int64_t> live_buffers{0};
  std::atomic<int64_t> live_executables{0};
  std::atomic<int64_t> buffers_created{0};
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> host_to_device{0};
  std::atomic<int64_t> device_to_host{0};
  std::atomic<int64_t> host_to_device_bytes{0};
  std::atomic<int64_t> device_to_host_bytes{0};
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_ns{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cache_misses{0};
  std::atomic<int64_t> disk_cache_hits{0};
  std::atomic<int64_t> cache_evictions{0};  // executables dropped from the in-memory compile cache (LRU bound)
  std::atomic<int64_t> disk_cache_evictions{0};  // files removed from the disk cache (its size bound)
  std::atomic<int64_t> disk_cache_refused{0};    // disk entries not loaded: another owner, or writable by others
  std::atomic<int64_t> donations{0};  // executions that reused an input buffer for an output (in-place updates)
  std::atomic<int64_t> writes_apart{0};  // partial writes lowered as an elementwise select (their update reads other elements)
  std::atomic<int64_t> graph_cache_hits{0};    // graphs run from the structural cache: nothing lowered or printed
  std::atomic<int64_t> graph_cache_misses{0};  // recorded graphs that had to be lowered (then compiled or text-cached)
  std::atomic<int64_t> graphs_run{0};   // programs run by the eager engine (one op, or a fused graph of many)
  std::atomic<int64_t> graph_nodes{0};  // ops recorded into those programs
  std::atomic<int64_t> host_syncs{0};      // times the host waited for device values (by reason: exec/sync.h)
  std::atomic<int64_t> cached_scalars{0};  // device copies of numbers kept for reuse (counted in live_buffers)
  std::atomic<int64_t> meta_calls{0};      // meta kernels run for output types (meta-result cache misses)
  std::atomic<int64_t> graph_replays{0};   // compiled graphs run again from their capture (no op dispatched)
  std::atomic<int64_t> dist_in_place{0};   // tpu_dist operands reduced in their own device buffer (XLA-CPU)

  std::map<std::string, int64_t> snapshot() const;
};

RuntimeCounters& runtime_counters();

}  // namespace torch_tpu
