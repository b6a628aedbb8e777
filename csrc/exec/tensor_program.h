// One StableHLO program over tpu storages: reads tensors (views of storages) as values, writes values into
// tensors (new storage contents that replace the old), creates new tensors, then compiles (cached) and runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>
#include <memory>
#include <vector>

#include "exec/device_data.h"
#include "hlo/builder.h"

namespace torch_tpu {

class TensorProgram {
 public:
  // `open_graph`: the device's open graph in fused mode (exec/graph.h), whose storages are marked pending until it
  // runs; otherwise a program that runs at once.
  explicit TensorProgram(int device, bool open_graph = false) : device_(device), open_graph_(open_graph) {}
  ~TensorProgram();
  TensorProgram(const TensorProgram&) = delete;
  TensorProgram& operator=(const TensorProgram&) = delete;

  HloBuilder& builder() { return b_; }
  int device() const { return device_; }

  // The value of a tpu tensor on this program's device, or of a CPU 0-dim tensor (as a constant).
  Value read(const at::Tensor& t);
  // A program argument fed by an existing buffer (e.g. one just uploaded from the host).
  Value external(std::shared_ptr<Buffer> buffer);
  // A 0-d program argument holding `value` (uploaded now), converted to `dtype`.
  Value host_scalar(const c10::Scalar& value, ElementType dtype);
  // A 1-D program argument holding `values` (one upload), converted to `dtype`.
  Value host_vector(const std::vector<c10::Scalar>& values, ElementType dtype);
  // Replaces the elements of tpu tensor `target` with `value` (converted to its dtype, broadcast to its shape).
  void write(const at::Tensor& target, const Value& value);
  // A new contiguous tpu tensor holding `value` (converted to `dtype`).
  at::Tensor output(const Value& value, at::ScalarType dtype);

  // Raises IndexError (or RuntimeError) with `message` after the program ran if the predicate `bad` holds anywhere;
  // "{value}" in the message becomes the 0-d integer `culprit`. Checks run on the device and are read when the
  // program completes (no extra host sync inside a graph).
  void add_check(const Value& bad, const std::string& message, bool index_error = true,
                 std::optional<Value> culprit = std::nullopt);

  // Compiles (through the cache) and executes; afterwards every written/created storage holds its new buffer.
  void run();

  // A storage of this (open) program died: it is no longer read or written here.
  void forget(const void* data);
  bool empty() const { return slots_.empty() && checks_.empty(); }

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

  void release_storages();

  int device_;
  bool open_graph_;
  HloBuilder b_;
  struct Check {
    Value bad;
    std::string message;
    bool index_error;
    std::optional<Value> culprit;
  };
  std::vector<Check> checks_;
  std::vector<std::shared_ptr<Buffer>> args_;
  std::map<const void*, StorageSlot> slots_;  // keyed by DeviceData
  std::vector<const void*> slot_order_;
};

// Uploads host tensor `src` (any layout; converted to `target`'s dtype and shape by the caller) into `target`.
void copy_host_to_device(const at::Tensor& src_contiguous, const at::Tensor& target);
// Downloads tpu tensor `src` into a new contiguous CPU tensor of the same dtype.
at::Tensor copy_device_to_host(const at::Tensor& src);

}  // namespace torch_tpu
