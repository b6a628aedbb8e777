// OpProgram: the eager engine's OpContext. A lowering rule run on a recorded op reads its arguments through it;
// tensors become values of the TensorProgram being built, numbers become constants or run-time arguments (what the
// structural cache keys on is noted in the op's OpFacts), checks become the program's device checks.
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exec/graph.h"
#include "exec/tensor_program.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {

// fn(t) for every defined tensor in `v` (a tensor, a tensor list, an optional-tensor list).
template <class Fn>
void for_each_tensor(const c10::IValue& v, const Fn& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) fn(e.toTensor());  // Python indexing passes undefined for `:`
    }
  }
}

// `v` with every tensor in it (a tensor, a tensor list, an optional-tensor list) replaced by fn(tensor). A template,
// not a std::function: it runs for every argument of every op.
template <class Fn>
c10::IValue map_tensors(const c10::IValue& v, const Fn& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    out.reserve(v.toListRef().size());
    for (const c10::IValue& e : v.toListRef()) out.push_back(fn(e.toTensor()));
    return out;
  }
  // Any tensor element, not only the first: index lists may start with None.
  if (v.isList() && std::any_of(v.toListRef().begin(), v.toListRef().end(),
                                [](const c10::IValue& e) { return e.isTensor(); })) {
    c10::List<std::optional<at::Tensor>> out;
    out.reserve(v.toListRef().size());
    for (const c10::IValue& e : v.toListRef()) {
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(fn(e.toTensor())) : std::nullopt);
    }
    return out;
  }
  return v;
}
// What PyTorch's meta kernel says an op returns: per output tensor, its dtype and sizes (or undefined/None).
struct OutType {
  bool defined = false;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : sizes) n *= d;
    return n;
  }
};

class OpProgram final : public OpContext {
 public:
  OpProgram(TensorProgram& program, const std::string& name, const std::vector<c10::IValue>& args,
            const std::vector<OutType>& outs, int node, OpFacts& facts)
      : OpContext(program.builder()),
        program_(program),
        name_(name),
        args_(args),
        outs_(outs),
        node_(node),
        facts_(facts) {}
  ~OpProgram() override {
    for (int i : value_reads_) facts_.runtime_args.erase(i);  // a value that steered the rule stays in the key
  }

  const std::string& op_name() const override { return name_; }
  size_t num_args() const override { return args_.size(); }
  const c10::IValue& arg(size_t i) const override {
    value_reads_.insert(static_cast<int>(i));
    return args_.at(i);
  }
  const c10::IValue& inspect(size_t i) const override { return args_.at(i); }
  Value tensor(size_t i) override { return read(args_.at(i).toTensor(), i, -1); }  // a CPU scalar: at run time
  std::vector<Value> tensor_list(size_t i) override {
    std::vector<Value> out;
    int k = 0;
    for_each_tensor(args_.at(i), [&](const at::Tensor& t) { out.push_back(read(t, i, k++)); });
    return out;
  }
  TensorType out(size_t i) const override {
    const OutType& o = outs_.at(i);
    TORCH_INTERNAL_ASSERT(o.defined, name_, ": output ", i, " is not produced");
    return TensorType{element_type_of(o.dtype), o.sizes};
  }
  bool out_defined(size_t i) const override { return outs_.at(i).defined; }
  size_t num_outputs() const override { return outs_.size(); }
  ElementType promoted(const std::vector<size_t>& indices) const override { return result_type_of(*this, indices); }
  // Numbers the rule computed itself: their values are baked into the structural key (all of them).
  Value runtime_scalar(const c10::Scalar& value, ElementType dtype) override {
    facts_.pinned = true;
    return program_.host_scalar(value, dtype);
  }
  Value runtime_vector(const std::vector<c10::Scalar>& values, ElementType dtype) override {
    facts_.pinned = true;
    return program_.host_vector(values, dtype);
  }
  // Number arguments taken at run time: the structural key leaves their values out.
  Value runtime_operand(size_t i, ElementType dtype, const std::vector<int64_t>& dims) override {
    facts_.runtime_args.insert(static_cast<int>(i));
    Value v = program_.host_scalar(args_.at(i).toScalar(), dtype, ArgSource::scalar(node_, static_cast<int>(i)));
    return b.broadcast_to(v, dims);
  }
  Value runtime_list(size_t i, ElementType dtype) override {
    facts_.runtime_args.insert(static_cast<int>(i));
    return program_.host_vector(number_list(i), dtype, ArgSource::list(node_, static_cast<int>(i)));
  }
  void check(const Value& bad, const std::string& message, bool index_error, std::optional<Value> culprit) override {
    note_failure(program_.add_check(bad, message, index_error, culprit));
  }
  void update_arg(size_t i, const Value& value) override {
    facts_.updates_args = true;
    program_.write(args_.at(i).toTensor(), value);
  }

 private:
  Value read(const at::Tensor& t, size_t i, int elem) {
    if (t.is_cpu()) facts_.runtime_args.insert(static_cast<int>(i));
    return program_.read(t, ArgSource::scalar(node_, static_cast<int>(i), elem));
  }

  TensorProgram& program_;
  const std::string& name_;
  const std::vector<c10::IValue>& args_;
  const std::vector<OutType>& outs_;
  int node_;
  OpFacts& facts_;
  mutable std::set<int> value_reads_;
};

}  // namespace torch_tpu
