#include "lowering/lib/common_dtype.h"

#include <string>
#include <utility>

namespace torch_tpu {
namespace {

bool inexact(ElementType t) { return is_floating(t) || is_complex(t); }

// The rule's context with result 0 typed `dtype`; everything else is the call's own.
class CommonDtypeContext final : public OpContext {
 public:
  CommonDtypeContext(OpContext& inner, ElementType dtype) : OpContext(inner.b), inner_(inner), dtype_(dtype) {}

  const std::string& op_name() const override { return inner_.op_name(); }
  size_t num_args() const override { return inner_.num_args(); }
  const c10::IValue& arg(size_t i) const override { return inner_.arg(i); }
  const c10::IValue& inspect(size_t i) const override { return inner_.inspect(i); }
  Value tensor(size_t i) override { return inner_.tensor(i); }
  std::vector<Value> tensor_list(size_t i) override { return inner_.tensor_list(i); }
  TensorType out(size_t i) const override {
    TensorType t = inner_.out(i);
    if (i == 0) t.dtype = dtype_;
    return t;
  }
  bool out_defined(size_t i) const override { return inner_.out_defined(i); }
  size_t num_outputs() const override { return inner_.num_outputs(); }
  ElementType promoted(const std::vector<size_t>& indices) const override { return inner_.promoted(indices); }
  Value runtime_scalar(const c10::Scalar& value, ElementType dtype) override { return inner_.runtime_scalar(value, dtype); }
  Value runtime_vector(const std::vector<c10::Scalar>& values, ElementType dtype) override {
    return inner_.runtime_vector(values, dtype);
  }
  Value runtime_list(size_t i, ElementType dtype) override { return inner_.runtime_list(i, dtype); }
  Value runtime_operand(size_t i, ElementType dtype, const std::vector<int64_t>& dims) override {
    return inner_.runtime_operand(i, dtype, dims);
  }
  void check(const Value& bad, const std::string& message, bool index_error, std::optional<Value> culprit) override {
    inner_.check(bad, message, index_error, std::move(culprit));
  }
  void update_arg(size_t i, const Value& value) override { inner_.update_arg(i, value); }

 private:
  OpContext& inner_;
  ElementType dtype_;
};

LoweringRule in_common_dtype(LoweringRule rule, std::vector<size_t> operands) {
  return [rule = std::move(rule), operands = std::move(operands)](OpContext& c) -> std::vector<Value> {
    ElementType out = c.out(0).dtype;
    if (!inexact(out)) return rule(c);
    std::vector<size_t> present;
    for (size_t i : operands) {
      if (c.has(i)) present.push_back(i);
    }
    ElementType common = c.promoted(present);
    if (common == out || !inexact(common)) return rule(c);
    CommonDtypeContext inner(c, common);
    std::vector<Value> results = rule(inner);
    if (!results.empty()) results[0] = c.b.convert(results[0], out);
    return results;
  };
}

}  // namespace

void compute_in_common_dtype(std::vector<LoweringRow>& rows) {
  for (LoweringRow& row : rows) {
    if (!row.promotes.empty()) row.rule = in_common_dtype(row.rule, row.promotes);
  }
}

const std::vector<size_t>* promoting_operands_of(const LoweringRow& row) {
  return row.promotes.empty() ? nullptr : &row.promotes;
}

}  // namespace torch_tpu
