// PrivateUse1 hooks (torch.accelerator, generators, pinned memory) and the per-device generators.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>

#include "backend/generator.h"
#include "exec/state.h"

namespace torch_tpu {

void resize_tpu_storage(const c10::Storage& storage, size_t nbytes);  // backend/kernels.cpp

TpuGenerator::TpuGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void TpuGenerator::set_current_seed(uint64_t seed) { host_.set_current_seed(seed); }
void TpuGenerator::set_offset(uint64_t offset) { host_.set_offset(offset); }
uint64_t TpuGenerator::get_offset() const { return host_.get_offset(); }
uint64_t TpuGenerator::current_seed() const { return host_.current_seed(); }
uint64_t TpuGenerator::seed() { return host_.seed(); }
void TpuGenerator::set_state(const c10::TensorImpl& new_state) { host_.unsafeGetGeneratorImpl()->set_state(new_state); }
c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const { return host_.unsafeGetGeneratorImpl()->get_state(); }

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index());
  g->host_ = host_.clone();
  return g;
}

const at::Generator& default_tpu_generator(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::map<c10::DeviceIndex, at::Generator> generators;
  std::lock_guard<std::mutex> lock(mu);
  auto it = generators.find(device);
  if (it == generators.end()) {
    auto gen = at::make_generator<TpuGenerator>(device);
    gen.set_current_seed(c10::default_rng_seed_val);
    it = generators.emplace(device, gen).first;
  }
  return it->second;
}

at::Generator host_generator_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  if (gen.has_value() && gen->defined()) {
    if (gen->device().type() == c10::DeviceType::CPU) return *gen;
    auto* tpu = dynamic_cast<TpuGenerator*>(gen->unsafeGetGeneratorImpl());
    TORCH_CHECK(tpu != nullptr, "Expected a 'tpu' device type for generator but found '", gen->device().type(), "'");
    return tpu->host();
  }
  auto* tpu = static_cast<TpuGenerator*>(default_tpu_generator(device).unsafeGetGeneratorImpl());
  return tpu->host();
}

namespace {

// Host memory for pin_memory(): plain pages, remembered so isPinnedPtr can answer. It is also the device's host
// allocator (torch.accelerator.empty_host_cache and the host memory stats ask it): it keeps no cache and no stream
// holds its pages, so emptying and recording are no-ops and the stats are zero.
class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = c10::alloc_cpu(nbytes == 0 ? 1 : nbytes);
    {
      std::lock_guard<std::mutex> lock(mu());
      ranges()[reinterpret_cast<uintptr_t>(p)] = nbytes;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}

  static bool contains(const void* ptr) {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu());
    auto it = ranges().upper_bound(p);
    if (it == ranges().begin()) return false;
    --it;
    return p >= it->first && p < it->first + std::max<size_t>(it->second, 1);
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<uintptr_t, size_t>& ranges() {
    static std::map<uintptr_t, size_t> r;
    return r;
  }
  static void release(void* p) {
    {
      std::lock_guard<std::mutex> lock(mu());
      ranges().erase(reinterpret_cast<uintptr_t>(p));
    }
    c10::free_cpu(p);
  }
};

PinnedHostAllocator& pinned_allocator() {
  static PinnedHostAllocator a;
  return a;
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &pinned_allocator())

class TpuHooks final : public at::PrivateUse1HooksInterface {
 public:
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override { return device_index < device_count(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = static_cast<c10::DeviceIndex>(current_device());
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_tpu_generator(device_index < 0 ? static_cast<c10::DeviceIndex>(current_device()) : device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<TpuGenerator>(device_index < 0 ? static_cast<c10::DeviceIndex>(current_device())
                                                             : device_index);
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator(); }
  bool isPinnedPtr(const void* data) const override { return PinnedHostAllocator::contains(data); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resize_tpu_storage(storage, new_bytes);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device()));
  }
};

const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  return true;
}();

}  // namespace
}  // namespace torch_tpu
