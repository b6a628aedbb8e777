// What a lowering rule sees: its op's arguments (in the functional overload's positions — inplace and out=
// variants share the rule), tensor arguments as StableHLO values, and the output types PyTorch's meta kernels
// computed. A rule emits StableHLO through `b` and returns one value per op result.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/builder.h"
#include "lowering/lib/builders.h"

namespace torch_tpu {

ElementType element_type_of(c10::ScalarType type);  // throws c10::TypeError for dtypes XLA cannot hold

class OpContext {
 public:
  explicit OpContext(HloBuilder& builder) : b(builder) {}
  virtual ~OpContext() = default;

  HloBuilder& b;

  virtual const std::string& op_name() const = 0;
  virtual size_t num_args() const = 0;
  // Argument i. Reading a number argument here counts as using its value (the structural cache then keys on it);
  // inspect(i) is for looking at an argument's kind, dtype or shape only.
  virtual const c10::IValue& arg(size_t i) const = 0;
  virtual const c10::IValue& inspect(size_t i) const { return arg(i); }
  // Tensor argument i as a value of its own dtype and shape (a CPU scalar tensor becomes a constant).
  virtual Value tensor(size_t i) = 0;
  virtual std::vector<Value> tensor_list(size_t i) = 0;
  // Result i as PyTorch computes it (meta kernels): dtype and shape.
  virtual TensorType out(size_t i) const = 0;
  // False for results PyTorch does not produce this time (e.g. output_mask entries that are false).
  virtual bool out_defined(size_t i) const = 0;
  virtual size_t num_outputs() const = 0;
  // Type promotion of the tensor/scalar arguments `indices`, as at::result_type computes it.
  virtual ElementType promoted(const std::vector<size_t>& indices) const = 0;
  // A number known only at run time (a program argument, not a constant), so programs do not change when values
  // such as learning rates or Adam's bias corrections do. Converted to `dtype`, 0-d.
  virtual Value runtime_scalar(const c10::Scalar& value, ElementType dtype) = 0;
  // Numbers known only at run time as one 1-D program argument (one transfer for a whole scalar list).
  virtual Value runtime_vector(const std::vector<c10::Scalar>& values, ElementType dtype) = 0;
  // Number-list argument i (a ScalarList) as one 1-D runtime argument. Prefer this and runtime_operand(i) over
  // runtime_scalar/runtime_vector of argument values: the structural cache then leaves the values out of its key
  // (a value taken at run time must not also steer the program's structure, unless the general path is right for
  // every value).
  virtual Value runtime_list(size_t i, ElementType dtype) { return runtime_vector(number_list(i), dtype); }
  std::vector<c10::Scalar> number_list(size_t i) const;
  // A check computed on the device: raises (IndexError if `index_error`, else RuntimeError) with `message` when any
  // element of the predicate `bad` holds. "{value}" in the message becomes the 0-d integer `culprit`. Reported when
  // the op's program completes (debug/strict) or when the fused graph runs: rules never wait for device values.
  virtual void check(const Value& bad, const std::string& message, bool index_error = true,
                     std::optional<Value> culprit = std::nullopt) = 0;
  // Whether one of the op's checks failed so far: a 0-d predicate, none when the op has no checks.
  const std::optional<Value>& failed() const { return failed_; }
  // An op whose check fails leaves its in-place targets as they were; the recorder does so by selecting the whole
  // target. A rule that already writes nothing on failure (it masks its own updates) says so here, and the
  // recorder skips that select: an in-place scatter then stays in place instead of copying its target.
  void keep_target_on_failure() { keeps_target_ = true; }
  bool keeps_target_on_failure() const { return keeps_target_; }
  // XLA clamps out-of-range gather/scatter indices; PyTorch raises. Checks that every element of the integer value
  // `idx` lies in [lo, hi), else raises with `message` ("{value}" names the first offender found). Elements equal
  // to `ignore` (e.g. a loss's ignore_index) are exempt.
  void check_range(const Value& idx, int64_t lo, int64_t hi, const std::string& message,
                   std::optional<int64_t> ignore = std::nullopt, bool index_error = true);
  void check_index_range(size_t i, int64_t lo, int64_t hi, const std::string& message,
                         std::optional<int64_t> ignore = std::nullopt) {
    check_range(tensor(i), lo, hi, message, ignore, true);
  }
  // Replaces the contents of tensor argument i with `value` (converted to its dtype): for ATen ops that update an
  // argument in place beyond their results (batch norm's running statistics).
  virtual void update_arg(size_t i, const Value& value) = 0;

  // Argument helpers.
  // False for None and for undefined tensors (autograd passes absent optional tensors, e.g. a bias, that way).
  bool has(size_t i) const {
    return i < num_args() && !inspect(i).isNone() && !(inspect(i).isTensor() && !inspect(i).toTensor().defined());
  }
  bool is_tensor(size_t i) const { return i < num_args() && inspect(i).isTensor(); }
  // Number argument i is present and equals 1: for skipping a multiply by alpha/value. An inspection, not a use of
  // the value: the general path (a runtime number) must be right for every value, 1 included.
  bool is_unit(size_t i) const { return has(i) && !is_tensor(i) && inspect(i).toScalar().equal(1); }
  double scalar(size_t i) const;
  int64_t integer(size_t i) const;
  bool flag(size_t i) const { return arg(i).toBool(); }
  std::vector<int64_t> ints(size_t i) const;
  // Number argument i as a runtime scalar broadcast to `dims`.
  virtual Value runtime_operand(size_t i, ElementType dtype, const std::vector<int64_t>& dims) {
    return b.broadcast_to(runtime_scalar(arg(i).toScalar(), dtype), dims);
  }
  // Argument i (tensor or number) converted to `dtype` and broadcast to `dims`; numbers become runtime scalars.
  Value operand(size_t i, ElementType dtype, const std::vector<int64_t>& dims);
  // Dimension argument i normalised against `rank` (negative counts from the end).
  int64_t dim(size_t i, int64_t rank) const;
  // Dimension list argument i (None or empty means all dims), normalised and sorted.
  std::vector<int64_t> dims(size_t i, int64_t rank) const;

 protected:
  // Implementations of check() record each check's "any element bad" here.
  void note_failure(const Value& any) { failed_ = failed_ ? b.binary("stablehlo.or", *failed_, any) : any; }

 private:
  std::optional<Value> failed_;
  bool keeps_target_ = false;
};

// at::result_type over `values` (defined tensors and numbers; anything else is skipped).
c10::ScalarType result_type_of(const std::vector<const c10::IValue*>& values);
// at::result_type over arguments `indices` of `c` (tensors and numbers), for OpContext::promoted overrides.
ElementType result_type_of(const OpContext& c, const std::vector<size_t>& indices);

// The value of a one-element CPU tensor (a CPU scalar argument: a learning rate, a wrapped Python number), read from
// its memory without a dispatcher call: .item() would re-enter the dispatcher, and through it any Python dispatch
// mode the caller runs under (AOTAutograd's first-call mode receives a wrapped number as a Python int and fails).
c10::Scalar cpu_scalar_value(const at::Tensor& t);

using LoweringRule = std::function<std::vector<Value>(OpContext&)>;
// Checks (or rewrites) an op's arguments before anything else looks at them (device checks, meta kernels, the rule),
// on every call. Pure: no dispatcher calls, no device reads. Preparation that needs the host (moving CPU index tensors
// to the device, expanding bool masks) is backend/prep.cpp's.
using ArgumentPrep = std::function<void(std::vector<c10::IValue>& args)>;

// A row that lowers only some uses of its ops says which: false sends that call to the CPU fallback.
using ArgumentFilter = std::function<bool(const std::vector<c10::IValue>& args)>;

struct LoweringRow {
  std::vector<std::string> names;  // ATen overloads served: functional, inplace, out= ("add.Tensor", "add_.Tensor", ...)
  LoweringRule rule;
  ArgumentPrep prepare = nullptr;   // optional
  ArgumentFilter applies = nullptr;  // optional: every call when absent
  // Pointwise ops whose operands promote together (add, atan2, addcmul, where, ...): the arguments that take part
  // (numbers such as alpha do not). The rule is then written for results of their common dtype; table.cpp wraps it
  // to compute in that dtype and convert once, as TensorIterator does for in-place and out= calls of another dtype.
  std::vector<size_t> promotes = {};
};

// A row whose `operands` promote together (sets LoweringRow::promotes).
inline LoweringRow promoting(std::vector<size_t> operands, LoweringRow row) {
  row.promotes = std::move(operands);
  return row;
}

// Shared pieces of rules.
int64_t normalize_dim(int64_t dim, int64_t rank);
Value zeros(HloBuilder& b, const TensorType& type);
Value full(HloBuilder& b, double value, const TensorType& type);
Value reduce_sum(HloBuilder& b, const Value& v, const std::vector<int64_t>& dims);
// Reshapes a reduction result so reduced dims stay as size 1 (keepdim=True).
Value keep_dims(HloBuilder& b, const Value& reduced, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& dims);
double lowest(ElementType t);
double highest(ElementType t);

}  // namespace torch_tpu
