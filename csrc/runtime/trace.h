// Execution tracing for profilers: while enabled, every program execution is recorded with its host enqueue time
// and its completion time (from the execution's PJRT event), its device and the correlation id of the profiled op
// that launched it. Off by default; the check on the execute path is one relaxed atomic load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu {

struct ExecutionRecord {
  std::string label;        // the program (Executable::label())
  int64_t device_id = 0;    // PJRT device id
  int64_t start_ns = 0;     // host time the execution was enqueued (ns since the Unix epoch)
  int64_t end_ns = 0;       // time its completion event fired
  uint64_t correlation = 0; // profiler correlation id active on the launching thread (0: none)
  int64_t thread = 0;       // launching thread (system id)
};

namespace trace {

int64_t now_ns();  // ns since the Unix epoch (the clock Kineto and PyTorch's profiler report in)
void set_enabled(bool on);
bool enabled() noexcept;
// Correlation ids of the profiled op running on this thread (a stack: ops nest).
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation() noexcept;
// Called by Executable::execute; `end_ns` arrives later, from the completion callback (see record_end).
void record(ExecutionRecord r);
// Every record completed so far, oldest first; clears them.
std::vector<ExecutionRecord> take();
// Executions started while enabled whose completion has not fired yet.
int64_t in_flight() noexcept;
void started() noexcept;
void finished() noexcept;

}  // namespace trace
}  // namespace torch_tpu
