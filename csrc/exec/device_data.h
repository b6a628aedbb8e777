// The device contents of a tpu storage: a 1-D PJRT buffer (any element type; readers bitcast) or nothing yet (an
// uninitialised storage reads as zeros). It is the context of the storage's DataPtr (see backend/storage.h).
#pragma once

#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

#include <memory>
#include <mutex>

#include "runtime/buffer.h"

namespace torch_tpu {

class DeviceData {
 public:
  DeviceData(int device, int64_t nbytes) : device_(device), nbytes_(nbytes) {}
  virtual ~DeviceData() = default;

  int device() const { return device_; }
  int64_t nbytes() const { return nbytes_; }
  bool valid() const { return magic_ == kMagic; }

  std::shared_ptr<Buffer> buffer() const {
    std::lock_guard<std::mutex> lock(mu_);
    return buffer_;
  }
  void set_buffer(std::shared_ptr<Buffer> buffer) {
    std::lock_guard<std::mutex> lock(mu_);
    buffer_ = std::move(buffer);
  }

 private:
  static constexpr uint32_t kMagic = 0x7470755f;  // "tpu_": guards against foreign DataPtr contexts
  uint32_t magic_ = kMagic;
  int device_;
  int64_t nbytes_;
  mutable std::mutex mu_;
  std::shared_ptr<Buffer> buffer_;
};

// The allocator records the address range of every live allocation, so a storage that wraps a tpu data_ptr() in a
// foreign DataPtr (a DLPack import: at::fromDLPack builds one around the exporter's pointer) finds its DeviceData.
void register_device_address(const void* base, size_t nbytes, DeviceData* data);
void unregister_device_address(const void* base);
// The DeviceData of a storage whose DataPtr is not torch_tpu's: the allocation that starts at its address (the
// storage then spans the whole allocation); throws naming the cause when there is none.
DeviceData& imported_device_data(const c10::Storage& storage);

// The DeviceData behind a tpu storage (throws for storages of other devices or other allocators).
inline DeviceData& device_data(const c10::Storage& storage) {
  const c10::DataPtr& ptr = storage.data_ptr();
  TORCH_CHECK(ptr.device().type() == c10::DeviceType::PrivateUse1, "expected a tpu storage, got one on ",
              ptr.device());
  auto* data = static_cast<DeviceData*>(ptr.get_context());
  if (data != nullptr && data->valid()) return *data;
  return imported_device_data(storage);
}

}  // namespace torch_tpu
