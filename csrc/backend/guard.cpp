// The device guard PyTorch (and its autograd engine, on its worker threads) uses to switch tpu devices, streams and
// events. Executions are ordered per device, so streams are names for the one queue and events are timestamps.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>

#include "exec/state.h"
#include "exec/sync.h"
#include "runtime/element_type.h"

namespace torch_tpu {

ElementType element_type_of(c10::ScalarType type);  // lowering/op_context.h (throws for dtypes XLA cannot hold)

namespace {

constexpr int kStreamPoolSize = 32;
thread_local c10::StreamId t_current_stream[64] = {};

struct TpuEvent {
  std::chrono::steady_clock::time_point recorded;
  bool was_recorded = false;
};

c10::Device tpu(c10::DeviceIndex index) { return c10::Device(c10::DeviceType::PrivateUse1, index); }

// torch.Stream(device="tpu") carries index -1: the current device.
c10::DeviceIndex resolve(c10::DeviceIndex index) {
  return index < 0 ? static_cast<c10::DeviceIndex>(current_device()) : index;
}

class TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (old.index() != d.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return tpu(static_cast<c10::DeviceIndex>(current_device())); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.is_privateuseone(), "expected a tpu device, got ", d);
    set_current_device(resolve(d.index()));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(resolve(d.index()));
    } catch (...) {
    }
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(device_count()); }

  // torch.accelerator.get_device_capability(): the dtypes a tpu tensor can hold (those with an XLA element type).
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device_index(resolve(d.index()));
    c10::DeviceCapability cap;
#define TPU_DTYPE_SUPPORTED(_, name) \
  cap.capability_data.supported_scalar_types.has_##name = supports(c10::ScalarType::name) ? 1 : 0;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TPU_DTYPE_SUPPORTED)
#undef TPU_DTYPE_SUPPORTED
    return cap;
  }
  static bool supports(c10::ScalarType type) {
    // Quantized tensors keep their integer values in tpu storage (backend/quantized.cpp).
    if (type == c10::kQInt8 || type == c10::kQUInt8 || type == c10::kQInt32) return true;
    try {
      element_type_of(type);
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }

  c10::Stream getStream(c10::Device d) const override {
    c10::DeviceIndex i = resolve(d.index());
    return c10::Stream(c10::Stream::UNSAFE, tpu(i), t_current_stream[i]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, tpu(resolve(d.index())));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool is_high_priority) const override { return getNewStream(d, 0); }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    static std::atomic<int> next{0};
    c10::StreamId id = 1 + (next++ % (kStreamPoolSize - 1));
    return c10::Stream(c10::Stream::UNSAFE, tpu(resolve(d.index())), id);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    t_current_stream[resolve(s.device_index())] = s.id();
    return old;
  }
  bool queryStream(const c10::Stream& s) const override { return device_idle(resolve(s.device_index())); }
  void synchronizeStream(const c10::Stream& s) const override { synchronize_device(resolve(s.device_index())); }
  void synchronizeDevice(const c10::DeviceIndex index) const override { synchronize_device(index); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    if (*event == nullptr) *event = new TpuEvent();
    synchronize_device(resolve(stream.device_index()));
    auto* e = static_cast<TpuEvent*>(*event);
    e->recorded = std::chrono::steady_clock::now();
    e->was_recorded = true;
  }
  void block(void* event, const c10::Stream& stream) const override {}
  bool queryEvent(void* event) const override { return true; }
  void synchronizeEvent(void* event) const override {}
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override {
    auto* a = static_cast<TpuEvent*>(start);
    auto* b = static_cast<TpuEvent*>(end);
    TORCH_CHECK(a && b && a->was_recorded && b->was_recorded,
                "Both events must be recorded before calculating elapsed time.");
    return std::chrono::duration<double, std::milli>(b->recorded - a->recorded).count();
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace torch_tpu
