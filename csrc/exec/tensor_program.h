// One StableHLO program over tpu storages: reads tensors (views of storages) as values, writes values into
// tensors (new storage contents that replace the old), creates new tensors, then compiles (cached) and runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <vector>

#include "exec/device_data.h"
#include "hlo/builder.h"

namespace torch_tpu {

class TensorProgram {
 public:
  explicit TensorProgram(int device) : device_(device) {}

  HloBuilder& builder() { return b_; }
  int device() const { return device_; }

  // The value of a tpu tensor on this program's device, or of a CPU 0-dim tensor (as a constant).
  Value read(const at::Tensor& t);
  // A program argument fed by an existing buffer (e.g. one just uploaded from the host).
  Value external(std::shared_ptr<Buffer> buffer);
  // A 0-d program argument holding `value` (uploaded now), converted to `dtype`.
  Value host_scalar(const c10::Scalar& value, ElementType dtype);
  // Replaces the elements of tpu tensor `target` with `value` (converted to its dtype, broadcast to its shape).
  void write(const at::Tensor& target, const Value& value);
  // A new contiguous tpu tensor holding `value` (converted to `dtype`).
  at::Tensor output(const Value& value, at::ScalarType dtype);

  // Compiles (through the cache) and executes; afterwards every written/created storage holds its new buffer.
  void run();

 private:
  struct StorageSlot {
    DeviceData* data = nullptr;
    std::shared_ptr<Buffer> buffer;  // the contents read (kept alive until the program ran)
    int arg_index = -1;              // its position among the program's arguments, if read from a buffer
    int64_t nbytes = 0;
    bool has_value = false;
    Value value;  // current contents, typed as the last reader/writer wanted
    bool written = false;
  };

  StorageSlot& slot(const at::Tensor& t);
  Value storage_value(StorageSlot& s, ElementType dtype);

  int device_;
  HloBuilder b_;
  std::vector<std::shared_ptr<Buffer>> args_;
  std::map<const void*, StorageSlot> slots_;  // keyed by StorageImpl
  std::vector<const void*> slot_order_;
};

// Uploads host tensor `src` (any layout; converted to `target`'s dtype and shape by the caller) into `target`.
void copy_host_to_device(const at::Tensor& src_contiguous, const at::Tensor& target);
// Downloads tpu tensor `src` into a new contiguous CPU tensor of the same dtype.
at::Tensor copy_device_to_host(const at::Tensor& src);

}  // namespace torch_tpu
