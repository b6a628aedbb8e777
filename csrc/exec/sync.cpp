#include "exec/sync.h"

#include "exec/device_data.h"
#include "exec/graph.h"
#include "runtime/counters.h"

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

namespace torch_tpu {
namespace {
std::atomic<int> g_mode{static_cast<int>(EagerMode::kFused)};
std::mutex g_mu;
struct Pending {
  Event event;
  std::shared_ptr<void> keep_alive;
};
std::map<int, std::vector<Pending>>& pending() {
  static std::map<int, std::vector<Pending>> p;
  return p;
}

std::vector<Pending> take(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Pending> out = std::move(pending()[device]);
  pending()[device].clear();
  return out;
}
}  // namespace

std::mutex g_sync_mu;
std::map<std::string, int64_t> g_sync_reasons;

void note_host_sync(const char* reason) {
  runtime_counters().host_syncs++;
  std::lock_guard<std::mutex> lock(g_sync_mu);
  g_sync_reasons[reason]++;
}

std::map<std::string, int64_t> host_sync_counts() {
  std::lock_guard<std::mutex> lock(g_sync_mu);
  return g_sync_reasons;
}

void reset_host_sync_counts() {
  std::lock_guard<std::mutex> lock(g_sync_mu);
  g_sync_reasons.clear();
}

void set_eager_mode(EagerMode mode) {
  flush_all_devices();  // a mode switch never strands recorded ops
  g_mode = static_cast<int>(mode);
}
EagerMode eager_mode() { return static_cast<EagerMode>(g_mode.load()); }

void track_pending(int device, Event event, std::shared_ptr<void> keep_alive) {
  if (!event.valid()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  auto& list = pending()[device];
  // Drop what already finished so the list stays short in long asynchronous runs.
  if (list.size() >= 64) {
    std::vector<Pending> still;
    for (auto& p : list) {
      if (!p.event.is_ready()) still.push_back(std::move(p));
    }
    list = std::move(still);
  }
  list.push_back(Pending{std::move(event), std::move(keep_alive)});
}

void synchronize_device(int device) {
  flush_device(device);
  std::vector<Pending> events = take(device);
  for (const auto& p : events) p.event.await();
}

void synchronize_all() {
  std::vector<int> devices;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto& kv : pending()) devices.push_back(kv.first);
  }
  for (int d : devices) synchronize_device(d);
}

bool device_idle(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& p : pending()[device]) {
    if (!p.event.is_ready()) return false;
  }
  return true;
}

}  // namespace torch_tpu
