// A fused graph as recorded: its ops (not lowered), the storages they touch and its structural key. Shared by the
// device's open graph (exec/graph.cpp) and by compiled-graph capture (exec/replay.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/graph.h"

namespace torch_tpu {

// A storage the recording reads or writes.
struct Slot {
  DeviceData* data = nullptr;                 // null once the storage's memory was replaced under the recording
  const c10::TensorImpl* snapshot = nullptr;  // one snapshot of it (alive as long as the recording)
  int snapshots = 0;                          // snapshot tensors of the recording that hold the storage
  bool written = false;
};

struct Recording {
  std::vector<RecordedOp> ops;
  std::string key;
  DotPrecision precision = DotPrecision::kHighest;  // of its matrix products: the one current at its first op
  std::unordered_map<const void*, int> slot_of;
  std::vector<Slot> slots;

  bool empty() const { return ops.empty(); }
  // Appends `op` with its node key (its structure and baked numbers); `updates_args`: it writes arguments its
  // schema does not mark as written; `mark_membership`: its storages are marked as read or written by the open graph.
  void add(RecordedOp op, const std::string& node_key, bool updates_args, bool mark_membership);
};

// The sizes of the last recording run, to reserve the next one's (steps of a training loop record alike).
struct RecordingSize {
  std::atomic<size_t> key{0};
  std::atomic<size_t> ops{0};
  std::atomic<size_t> slots{0};
};
RecordingSize& last_recording_size();

// Lowers one recorded op into `program` as op number `node`, learning its facts (sets *facts_changed when they
// differ from what was known).
void lower_op(TensorProgram& program, const RecordedOp& op, int node, bool* facts_changed = nullptr);
// The device buffer a kScalar or kList argument source of `ops` names (a number of a recorded op, or its list).
std::shared_ptr<Buffer> number_source_buffer(int device, const std::vector<RecordedOp>& ops, const ArgSource& src);
// The recording's storages are no longer referred to by an open graph.
void reset_membership(const Recording& rec);

// Runs a recording: from the structural cache when its key is known, else lowered (and then remembered).
void run_recording(int device, Recording& rec);

// Capture of one call's ops (compiled graphs, exec/replay.h). begin_capture runs the device's open graph and
// returns a token; until end_capture the graph has no node limit. end_capture takes the ops recorded since out of
// the open graph when they are all it holds (nothing ran, nothing was lowered as it came) and hands them to `use`
// under the graph's lock (which must run them: their storages are pending), then returns true; otherwise it
// returns false and the open graph carries on as usual (as it does when `use` is empty: a call that raised).
uint64_t begin_capture(int device);
bool end_capture(int device, uint64_t token, const std::function<void(Recording&)>& use);

}  // namespace torch_tpu
