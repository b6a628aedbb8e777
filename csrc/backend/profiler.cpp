// The tpu device in PyTorch's profilers.
//
// (a) ProfilerStubs (torch.autograd.profiler.profile(use_device="tpu", use_kineto=False), the PrivateUse1 fallback
//     state): each op is bracketed by two markers; the device time of an op is the time between them. Debug eager
//     waits for each execution inside its op, so there the bracket holds the execution; in strict mode it holds the
//     enqueue (the Kineto path below reports true completion times).
// (b) A Kineto activity profiler (torch.profiler.profile(activities=[CPU, PrivateUse1])): while a session records,
//     every program execution is traced (runtime/trace.h) from enqueue to its completion event, linked to the op that
//     launched it, and reported as a device kernel on the tpu lane: key_averages() shows each compiled program's
//     device time, a Chrome trace shows a "tpu" process. The session's metadata carries the runtime counters
//     (executions, compiles, transfers) of the profiled span.
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <chrono>
#include <thread>

#include "exec/state.h"
#include "exec/sync.h"
#include "runtime/counters.h"
#include "runtime/trace.h"

#ifdef USE_KINETO
#include <libkineto.h>
#include <output_base.h>
#endif

namespace torch_tpu {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// (a) stubs

struct Marker {
  int64_t ns;
};

class TpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) *device = static_cast<c10::DeviceIndex>(current_device());
    int64_t now = c10::getTime();
    if (event != nullptr) *event = std::make_shared<Marker>(Marker{now});
    if (cpu_ns != nullptr) *cpu_ns = now;
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    if (a == nullptr || b == nullptr || !*a || !*b) return 0.0f;
    auto* start = static_cast<const Marker*>(a->get());
    auto* end = static_cast<const Marker*>(b->get());
    return static_cast<float>(end->ns - start->ns) / 1000.0f;  // µs
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int i = 0; i < device_count(); ++i) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(i)));
      op(i);
    }
  }
  void synchronize() const override { synchronize_all(); }
};

const bool g_stubs_registered = [] {
  static TpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

#ifdef USE_KINETO
// ---------------------------------------------------------------------------------------------------------------
// (b) Kineto activity profiler

std::map<std::string, int64_t> counter_snapshot() { return runtime_counters().snapshot(); }

class TpuSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    trace::take();  // drop records of an earlier span
    // Kineto keeps a configured session and restarts it for later profiles, also CPU-only ones: trace the device
    // only while the active profile asked for PrivateUse1 activities.
    auto* state = torch::profiler::impl::ProfilerStateBase::get();
    active_ = state != nullptr && state->config().state == torch::profiler::impl::ProfilerState::KINETO_PRIVATEUSE1;
    records_.clear();
    if (!active_) return;
    baseline_ = counter_snapshot();
    trace::set_enabled(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!active_) return;
    active_ = false;
    synchronize_all();
    trace::set_enabled(false);
    // Completion callbacks run on plugin threads: give the last ones a moment to land.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (trace::in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    records_ = trace::take();
    auto now = counter_snapshot();
    for (const auto& kv : now) {
      auto it = baseline_.find(kv.first);
      delta_[kv.first] = kv.second - (it == baseline_.end() ? 0 : it->second);
    }
    status_ = libkineto::TraceStatus::READY;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { process(logger, nullptr); }
  // Kineto passes a lookup from correlation ids to the CPU ops it recorded: linking each execution to the op that
  // launched it lets PyTorch attribute the device time to that op (its "tpu total" column), as for CUDA kernels.
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    process(logger, linked);
  }

  void process(libkineto::ActivityLogger& logger, const libkineto::getLinkedActivityCallback& linked) {
    span_ = libkineto::TraceSpan(0, 0, "tpu");
    activities_.clear();
    // Kineto may process a finished session again in a later profile: its records are reported once.
    std::vector<ExecutionRecord> records = std::move(records_);
    records_.clear();
    for (const auto& r : records) {
      auto a = std::make_unique<libkineto::GenericTraceActivity>(span_, libkineto::ActivityType::CONCURRENT_KERNEL,
                                                                 r.label);
      a->startTime = r.start_ns;
      a->endTime = std::max(r.end_ns, r.start_ns);
      a->id = static_cast<int32_t>(r.correlation);
      a->device = static_cast<int32_t>(r.device_id);
      a->resource = 0;
      a->threadId = static_cast<int32_t>(r.thread);
      a->flow.id = static_cast<uint32_t>(r.correlation);
      a->flow.type = libkineto::kLinkAsyncCpuGpu;
      a->flow.start = 0;
      if (linked && r.correlation != 0) a->linked = linked(static_cast<int32_t>(r.correlation));
      a->log(logger);
      activities_.push_back(std::move(a));
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "tpu", "tpu"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (int i = 0; i < device_count(); ++i) out.push_back(libkineto::ResourceInfo{0, i, i, "tpu:" + std::to_string(i)});
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { trace::push_correlation(id); }
  void popCorrelationId() override { trace::pop_correlation(); }

  std::unordered_map<std::string, std::string> getMetadata() override {
    std::string json = "{";
    bool first = true;
    for (const auto& kv : delta_) {
      json += (first ? "\"" : ", \"") + kv.first + "\": " + std::to_string(kv.second);
      first = false;
    }
    return {{"tpu_metrics", json + "}"}};
  }

 private:
  bool active_ = false;
  std::map<std::string, int64_t> baseline_;
  std::map<std::string, int64_t> delta_;
  std::vector<ExecutionRecord> records_;
  libkineto::TraceSpan span_{0, 0, "tpu"};
  std::vector<std::unique_ptr<libkineto::GenericTraceActivity>> activities_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    return wanted(types) ? std::make_unique<TpuSession>() : nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    return wanted(types) ? std::make_unique<TpuSession>() : nullptr;
  }

 private:
  // torch.profiler asks for PRIVATEUSE1_* when ProfilerActivity.PrivateUse1 (TPU) is among the activities.
  bool wanted(const std::set<libkineto::ActivityType>& types) const {
    return types.count(libkineto::ActivityType::PRIVATEUSE1_RUNTIME) ||
           types.count(libkineto::ActivityType::PRIVATEUSE1_DRIVER);
  }
  std::string name_ = "torch_tpu";
  std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                   libkineto::ActivityType::PRIVATEUSE1_DRIVER};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);
#endif  // USE_KINETO

}  // namespace
}  // namespace torch_tpu
