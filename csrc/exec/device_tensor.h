// Tensors exec creates on a device (program results, compiled-graph outputs). Their storages come from the allocator
// backend installs once at start-up, and the tensor objects are built directly: exec never goes through the
// dispatcher (or backend) to make one.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

namespace torch_tpu {

// Called once by backend at load (backend/storage.cpp).
void install_device_allocator(c10::Allocator* allocator);
c10::Allocator& device_allocator();

// Makes `device` the calling thread's current tpu device (where the allocator allocates) until destroyed.
class OnDevice {
 public:
  explicit OnDevice(int device);
  ~OnDevice();
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int saved_;
};

// A new contiguous tpu tensor. Under DeferredBooking (exec/device_data.h) its bytes are booked when it gets contents.
at::Tensor new_device_tensor(int device, c10::IntArrayRef sizes, at::ScalarType dtype);

}  // namespace torch_tpu
