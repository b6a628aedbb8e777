#include "runtime/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>

namespace torch_tpu::trace {
namespace {
std::atomic<bool> g_enabled{false};
std::atomic<int64_t> g_in_flight{0};
std::mutex g_mu;
std::vector<ExecutionRecord>& records() {
  static auto* r = new std::vector<ExecutionRecord>();  // leaked: callbacks may fire during static destruction
  return *r;
}
thread_local std::vector<uint64_t> t_correlation;
}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool enabled() noexcept { return g_enabled.load(std::memory_order_relaxed); }

void push_correlation(uint64_t id) { t_correlation.push_back(id); }
void pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
uint64_t current_correlation() noexcept { return t_correlation.empty() ? 0 : t_correlation.back(); }

void record(ExecutionRecord r) {
  if (r.thread == 0) r.thread = static_cast<int64_t>(::syscall(SYS_gettid));
  std::lock_guard<std::mutex> lock(g_mu);
  records().push_back(std::move(r));
}

std::vector<ExecutionRecord> take() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<ExecutionRecord> out;
  out.swap(records());
  return out;
}

int64_t in_flight() noexcept { return g_in_flight.load(); }
void started() noexcept { g_in_flight++; }
void finished() noexcept { g_in_flight--; }

}  // namespace torch_tpu::trace
