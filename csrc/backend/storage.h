// The tpu allocator. A tpu storage's DataPtr points at a reserved, never-dereferenced host address range of the
// storage's size (so PyTorch can compare and offset data_ptr()s) and carries a DeviceData (exec/device_data.h) as
// its context: the device contents.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include "exec/device_data.h"

namespace torch_tpu {

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id) override {}
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Bytes one device can hold: the plugin's limit where it reports one, else physical host memory (XLA-CPU).
  static int64_t device_capacity(int device);
};

TpuAllocator& tpu_allocator();

}  // namespace torch_tpu
