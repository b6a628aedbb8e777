// How one call becomes a node of its device's graph (exec/graph.h): snapshots of its tensors, its structure (all
// its lowering depends on except storage identity and number values), new tensors for its results, and the function
// that lowers it when the graph is built. backend/ decides what runs here and supplies the output types (from
// PyTorch's meta kernels); everything below that decision lives in exec/.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/op_program.h"

namespace torch_tpu {

class TensorProgram;

// Key pieces: the decimal digits of `v`; ",d0,d1,..." for sizes or strides (no temporary strings: keys are built
// for every op).
void append_int(std::string& s, int64_t v);
void append_dims(std::string& s, c10::IntArrayRef dims);
// One argument's piece of a key: tensors through `tensor` (each key decides what of a tensor counts), lists
// element by element, numbers, strings, devices and None by value.
using TensorKeyFn = void (*)(std::string& key, const at::Tensor& t);
void append_ivalue_key(std::string& key, const c10::IValue& v, TensorKeyFn tensor);

// A view of `t`'s storage with its sizes, strides and offset as they are now (later metadata changes to `t`, such
// as resize_ or .data assignment, do not reach a recorded op); CPU scalars are copied (their values may change).
at::Tensor snapshot(const at::Tensor& t);

// How one argument of a lowering-table op enters its node.
struct ArgRole {
  bool number = false;       // a number type (Scalar, float, optional of either): taken at run time
  bool number_list = false;  // a list of those
  bool writes = false;       // an inplace/out= argument
};

using OutTypes = std::shared_ptr<const std::vector<OutType>>;  // shared by the meta cache and the ops recorded with it

// One call of an op of the lowering table whose output types are known. The pointers outlive every recorded op.
struct LoweredCall {
  const LoweringRow* row = nullptr;
  const std::string* name = nullptr;        // "aten::add.Tensor": heads the node's structure
  const std::string* short_name = nullptr;  // "add.Tensor": what the rule sees as op_name()
  const std::vector<ArgRole>* roles = nullptr;  // per argument
  std::vector<c10::IValue> args;
  OutTypes outs;
  // The written arguments that receive the results, in order; empty when the results are new tensors.
  std::vector<at::Tensor> targets;
};

// Records `call` on `device` (fused: appended to the open graph; debug/strict: run now) and returns its results:
// the targets, or new tensors that hold their values once the graph runs (undefined where a result is None).
std::vector<at::Tensor> record_lowered_op(int device, LoweredCall call);

// An op outside the lowering table (SDPA, copy_) recorded like one. `structure` names everything `lower` bakes in
// besides the tensors' types and views; `lower` reads `reads` and writes every tensor of `writes` (snapshots of the
// caller's tensors, in order; undefined ones are left out).
using CustomLowering = std::function<void(TensorProgram& program, const std::vector<at::Tensor>& reads,
                                          const std::vector<at::Tensor>& writes)>;
void record_custom_op(int device, std::string structure, const std::vector<at::Tensor>& reads,
                      const std::vector<at::Tensor>& writes, CustomLowering lower);

// self.copy_(src) between tensors of one tpu device.
void record_same_device_copy(const at::Tensor& self, const at::Tensor& src);

// A new tpu tensor for a recorded op's result (in fused mode its device memory is booked only once it holds a value).
at::Tensor new_output(int device, c10::IntArrayRef sizes, at::ScalarType dtype);

}  // namespace torch_tpu
