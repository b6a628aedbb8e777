// Work in flight per device. Debug mode awaits every execution at once; strict mode records the completion events
// here, and sync points (synchronize(), host reads, events) wait for them and surface their errors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/event.h"

namespace torch_tpu {

// Debug: every execution completes before its op returns. Strict: executions are enqueued and the host waits only
// at sync points (host reads, synchronize(), events).
// Fused: ops append to the device's open graph, which runs at host reads, synchronize(), a node limit, or when a
// program of its own needs one of its storages (exec/graph.h).
enum class EagerMode { kDebug = 0, kStrict = 1, kFused = 2 };
void set_eager_mode(EagerMode mode);
EagerMode eager_mode();

// `keep_alive` (e.g. the host memory of an asynchronous copy) is released once the event is known to have fired.
void track_pending(int device, Event event, std::shared_ptr<void> keep_alive = nullptr);
// Frees what finished executions kept alive (their arguments); does not wait.
void release_finished(int device);
// The same on every device, checking every entry (a host read may return before its execution's event is marked).
void release_all_finished();
// Waits for everything in flight on `device`; rethrows the first error (naming the op that caused it).
void synchronize_device(int device);
void synchronize_all();
bool device_idle(int device);

// A device-side check of a program that ran asynchronously (strict/fused): its predicate and culprit results and
// PyTorch's message ("{value}" = the culprit). Reported at the device's next sync point.
struct DeferredCheck {
  std::shared_ptr<Buffer> bad;
  std::shared_ptr<Buffer> culprit;
  std::string message;
  bool index_error = true;
};
void defer_checks(int device, std::vector<DeferredCheck> checks);
// Reads the deferred checks of `device` (waiting for their programs) and raises the first that failed, as
// IndexError or RuntimeError. Called at host reads and synchronize(); debug mode checks at the op instead.
void raise_deferred_checks(int device);
void raise_check(const DeferredCheck& check);

// Counts a host wait for device values under `reason` (metrics()["host_syncs_by_reason"]).
void note_host_sync(const char* reason);
std::map<std::string, int64_t> host_sync_counts();
void reset_host_sync_counts();

}  // namespace torch_tpu
