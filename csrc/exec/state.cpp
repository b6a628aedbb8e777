#include "exec/state.h"

#include <ATen/Context.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "runtime/pjrt.h"

namespace torch_tpu {
namespace {
std::mutex g_mu;
std::shared_ptr<const BackendState> g_state;
thread_local int t_current_device = 0;

std::shared_ptr<const BackendState> load_state() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state;
}
}  // namespace

void set_backend_state(std::shared_ptr<Client> client, std::shared_ptr<CompileCache> cache,
                       std::vector<int> pjrt_index) {
  auto state = std::make_shared<BackendState>();
  state->client = std::move(client);
  state->cache = std::move(cache);
  state->pjrt_index = std::move(pjrt_index);
  int64_t host_memory = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  for (int index : state->pjrt_index) {
    MemoryStats m = state->client->memory_stats(index);
    state->capacity.push_back(m.available && m.bytes_limit ? *m.bytes_limit : host_memory);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_state = std::move(state);
}

int device_count() noexcept {
  auto s = load_state();
  return s ? static_cast<int>(s->pjrt_index.size()) : 0;
}

const BackendState& backend_state() {
  if (in_forked_child()) fail_in_forked_child("tpu");
  // The state is never replaced once set (set_backend_state runs once, at import), so a reference stays valid.
  static thread_local std::shared_ptr<const BackendState> cached;
  if (!cached) cached = load_state();
  if (!cached) {
    fail(ErrorCode::kFailedPrecondition, "tpu",
         "the tpu device is unavailable: no PJRT plugin was loaded (see torch_tpu.runtime.status())");
  }
  return *cached;
}

void check_device_index(int index) {
  int n = device_count();
  if (index < 0 || index >= n) {
    // PyTorch's wordings, which code matches: openreg's and XPU's "The device index is out of range", CUDA's
    // "invalid device ordinal".
    fail(ErrorCode::kInvalidArgument, "tpu",
         "The device index is out of range. It must be in [0, " + std::to_string(n) + "), but got " +
             std::to_string(index) + " (invalid device ordinal).");
  }
}

PJRT_Device* pjrt_device(int index) {
  const BackendState& s = backend_state();
  check_device_index(index);
  return s.client->device(s.pjrt_index[index]).raw;
}

int current_device() noexcept { return t_current_device; }

void set_current_device(int index) {
  check_device_index(index);
  t_current_device = index;
}

namespace {
std::atomic<int> g_precision_override{-1};
}  // namespace

DotPrecision current_dot_precision() {
  int o = g_precision_override.load(std::memory_order_relaxed);
  if (o >= 0) return static_cast<DotPrecision>(o);
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST:
      return DotPrecision::kHighest;
    case at::Float32MatmulPrecision::HIGH:
      return DotPrecision::kHigh;
    case at::Float32MatmulPrecision::MEDIUM:
      return DotPrecision::kDefault;
  }
  return DotPrecision::kHighest;
}

void set_dot_precision_override(int precision) {
  if (precision < -1 || precision > 2) {
    fail(ErrorCode::kInvalidArgument, "set_dot_precision_override", "precision must be DEFAULT, HIGH or HIGHEST");
  }
  g_precision_override.store(precision);
}

int dot_precision_override() { return g_precision_override.load(); }

const char* dot_precision_name(DotPrecision p) {
  switch (p) {
    case DotPrecision::kDefault:
      return "DEFAULT";
    case DotPrecision::kHigh:
      return "HIGH";
    case DotPrecision::kHighest:
      return "HIGHEST";
  }
  return "DEFAULT";
}

}  // namespace torch_tpu
