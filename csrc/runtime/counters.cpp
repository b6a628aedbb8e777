#include "runtime/counters.h"

namespace torch_tpu {

RuntimeCounters& runtime_counters() {
  static RuntimeCounters counters;
  return counters;
}

std::map<std::string, int64_t> RuntimeCounters::snapshot() const {
  return {
      {"live_buffers", live_buffers.load()},
      {"live_executables", live_executables.load()},
      {"buffers_created", buffers_created.load()},
      {"executions", executions.load()},
      {"host_to_device", host_to_device.load()},
      {"device_to_host", device_to_host.load()},
      {"host_to_device_bytes", host_to_device_bytes.load()},
      {"device_to_host_bytes", device_to_host_bytes.load()},
      {"compiles", compiles.load()},
      {"compile_ns", compile_ns.load()},
      {"cache_hits", cache_hits.load()},
      {"cache_misses", cache_misses.load()},
      {"disk_cache_hits", disk_cache_hits.load()},
      {"cache_evictions", cache_evictions.load()},
      {"disk_cache_evictions", disk_cache_evictions.load()},
      {"disk_cache_refused", disk_cache_refused.load()},
      {"donations", donations.load()},
      {"writes_apart", writes_apart.load()},
      {"graphs_run", graphs_run.load()},
      {"graph_cache_hits", graph_cache_hits.load()},
      {"graph_cache_misses", graph_cache_misses.load()},
      {"graph_nodes", graph_nodes.load()},
      {"host_syncs", host_syncs.load()},
      {"cached_scalars", cached_scalars.load()},
      {"meta_calls", meta_calls.load()},
      {"graph_replays", graph_replays.load()},
      {"dist_in_place", dist_in_place.load()},
  };
}

}  // namespace torch_tpu
