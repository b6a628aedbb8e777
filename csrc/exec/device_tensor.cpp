#include "exec/device_tensor.h"

#include <ATen/EmptyTensor.h>

#include <atomic>

#include "exec/state.h"

namespace torch_tpu {
namespace {
std::atomic<c10::Allocator*> g_allocator{nullptr};
}  // namespace

void install_device_allocator(c10::Allocator* allocator) { g_allocator.store(allocator); }

c10::Allocator& device_allocator() {
  c10::Allocator* a = g_allocator.load();
  TORCH_INTERNAL_ASSERT(a != nullptr, "the tpu allocator was not installed (backend/storage.cpp does it at load)");
  return *a;
}

OnDevice::OnDevice(int device) : saved_(current_device()) {
  if (device != saved_) set_current_device(device);
}

OnDevice::~OnDevice() {
  if (current_device() != saved_) {
    try {
      set_current_device(saved_);
    } catch (...) {  // the saved device was valid when saved; never throw from a destructor
    }
  }
}

at::Tensor new_device_tensor(int device, c10::IntArrayRef sizes, at::ScalarType dtype) {
  OnDevice on(device);
  return at::detail::empty_generic(sizes, &device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype, std::nullopt);
}

}  // namespace torch_tpu
