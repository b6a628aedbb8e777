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

std::mutex g_checks_mu;
std::map<int, std::vector<DeferredCheck>> g_checks;

void defer_checks(int device, std::vector<DeferredCheck> checks) {
  std::lock_guard<std::mutex> lock(g_checks_mu);
  auto& list = g_checks[device];
  for (auto& c : checks) list.push_back(std::move(c));
}

void raise_check(const DeferredCheck& check) {
  bool bad = false;
  check.bad->to_host(&bad, sizeof(bad));
  if (!bad) return;
  std::string message = check.message;
  size_t at = message.find("{value}");
  if (at != std::string::npos) {
    int64_t culprit = 0;
    check.culprit->to_host(&culprit, sizeof(culprit));
    message.replace(at, 7, std::to_string(culprit));
  }
  if (check.index_error) TORCH_CHECK_INDEX(false, message);
  TORCH_CHECK(false, message);
}

void raise_deferred_checks(int device) {
  std::vector<DeferredCheck> checks;
  {
    std::lock_guard<std::mutex> lock(g_checks_mu);
    auto it = g_checks.find(device);
    if (it == g_checks.end() || it->second.empty()) return;
    checks = std::move(it->second);
    it->second.clear();
  }
  for (const DeferredCheck& c : checks) raise_check(c);  // the first failure raises; the rest are dropped
}

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

namespace {
// Moves every entry of `list` whose execution finished into `finished`.
void take_all_finished(std::vector<Pending>& list, std::vector<Pending>& finished) {
  std::vector<Pending> still;
  for (auto& p : list) (p.event.is_ready() ? finished : still).push_back(std::move(p));
  list = std::move(still);
}

// The same, cheaply: executions on one device complete in order, so checking from the front is enough, except when
// a long list has a slow head.
void sweep_finished(std::vector<Pending>& list, std::vector<Pending>& finished) {
  size_t done = 0;
  while (done < list.size() && list[done].event.is_ready()) ++done;
  if (done == 0 && list.size() >= 64) {
    take_all_finished(list, finished);
  } else if (done > 0) {
    finished.assign(std::make_move_iterator(list.begin()), std::make_move_iterator(list.begin() + done));
    list.erase(list.begin(), list.begin() + done);
  }
}
}  // namespace

void track_pending(int device, Event event, std::shared_ptr<void> keep_alive) {
  if (!event.valid()) return;
  std::vector<Pending> finished;  // released after the lock: what they keep alive may be large
  std::lock_guard<std::mutex> lock(g_mu);
  auto& list = pending()[device];
  sweep_finished(list, finished);  // the list stays short and what it keeps alive is freed soon after it ran
  list.push_back(Pending{std::move(event), std::move(keep_alive)});
}

void release_finished(int device) {
  std::vector<Pending> finished;
  std::lock_guard<std::mutex> lock(g_mu);
  sweep_finished(pending()[device], finished);
}

void release_all_finished() {
  std::vector<Pending> finished;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& kv : pending()) take_all_finished(kv.second, finished);
}

void synchronize_device(int device) {
  flush_device(device);
  std::vector<Pending> events = take(device);
  for (const auto& p : events) p.event.await();
  raise_deferred_checks(device);
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
