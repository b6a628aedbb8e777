#include "exec/graph.h"

#include <array>
#include <memory>
#include <mutex>

#include "exec/state.h"
#include "exec/sync.h"
#include "runtime/counters.h"
#include "runtime/error.h"

namespace torch_tpu {
namespace {

constexpr int kMaxDevices = 64;

struct OpenGraph {
  std::recursive_mutex mu;  // the autograd thread and the user's thread append to the same graph
  std::unique_ptr<TensorProgram> program;
  int64_t nodes = 0;
  int building = 0;  // ops being appended (nested dispatch counts): running the graph now would cut them in half
};

std::array<OpenGraph, kMaxDevices>& graphs() {
  static std::array<OpenGraph, kMaxDevices> g;
  return g;
}

OpenGraph& graph_of(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "tpu device index ", device, " is out of range");
  return graphs()[static_cast<size_t>(device)];
}

std::atomic<int64_t> g_node_limit{4096};

}  // namespace

void flush_device(int device) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (!g.program) return;
  if (g.building > 0) {
    fail(ErrorCode::kInternal, "flush_device",
         "an op's lowering waited for device values while it was being recorded into the fused graph");
  }
  std::unique_ptr<TensorProgram> program = std::move(g.program);
  g.nodes = 0;
  program->run();
}

void forget_in_graph(int device, const void* data) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (g.program) g.program->forget(data);
}

void flush_all_devices() {
  for (int d = 0; d < kMaxDevices; ++d) {
    OpenGraph& g = graphs()[static_cast<size_t>(d)];
    std::lock_guard<std::recursive_mutex> lock(g.mu);
    if (g.program) flush_device(d);
  }
}

void set_graph_node_limit(int64_t nodes) { g_node_limit = std::max<int64_t>(nodes, 1); }
int64_t graph_node_limit() { return g_node_limit.load(); }

void with_program(int device, const std::function<void(TensorProgram&)>& build) {
  runtime_counters().graph_nodes++;
  if (eager_mode() != EagerMode::kFused) {
    TensorProgram program(device);
    build(program);
    program.run();
    return;
  }
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (!g.program) g.program = std::make_unique<TensorProgram>(device, /*open_graph=*/true);
  TensorProgram& program = *g.program;
  ++g.building;
  try {
    build(program);
  } catch (...) {
    --g.building;
    throw;
  }
  --g.building;
  if (g.building > 0) return;  // an op dispatched from inside another op's recording
  if (++g.nodes >= g_node_limit.load()) flush_device(device);
}

}  // namespace torch_tpu
