#include "lowering/lib/common_dtype.h"

#include <string>
#include <unordered_map>
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

// Functional overload name -> the arguments that take part in type promotion (numbers such as alpha do not).
const std::unordered_map<std::string, std::vector<size_t>>& promoting_operands() {
  static const std::unordered_map<std::string, std::vector<size_t>> table = [] {
    std::unordered_map<std::string, std::vector<size_t>> m;
    for (const char* name : {"add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar",
                             "div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode", "atan2", "fmod.Tensor",
                             "fmod.Scalar", "remainder.Tensor", "remainder.Scalar", "hypot", "xlogy.Tensor",
                             "xlogy.Scalar_Other", "logaddexp", "logaddexp2", "nextafter", "copysign.Tensor",
                             "copysign.Scalar", "pow.Tensor_Tensor", "pow.Tensor_Scalar", "floor_divide",
                             "floor_divide.Scalar", "maximum", "minimum", "fmax", "fmin", "special_xlog1py",
                             "special_zeta", "igamma", "igammac", "heaviside", "lerp.Scalar"}) {
      m[name] = {0, 1};
    }
    for (const char* name : {"addcmul", "addcdiv", "lerp.Tensor", "clamp.Tensor"}) m[name] = {0, 1, 2};
    // Float unary ops: computed in the input's dtype (an out= of another float dtype gets that result converted).
    for (const char* name : {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos",
                             "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "reciprocal",
                             "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma", "i0", "logit", "sinc", "deg2rad",
                             "rad2deg", "special_i0e", "special_i1", "special_i1e", "special_ndtri", "special_log_ndtr",
                             "special_erfcx", "special_entr", "special_expit", "special_ndtr", "mvlgamma"}) {
      m[name] = {0};
    }
    m["polygamma"] = {1};  // polygamma(n, self)
    m["where.self"] = {1, 2};
    return m;
  }();
  return table;
}

}  // namespace

void compute_in_common_dtype(std::vector<LoweringRow>& rows) {
  const auto& table = promoting_operands();
  for (LoweringRow& row : rows) {
    for (const std::string& name : row.names) {
      auto it = table.find(name);
      if (it == table.end()) continue;
      row.rule = in_common_dtype(row.rule, it->second);
      break;
    }
  }
}

const std::vector<size_t>* promoting_operands_of(const LoweringRow& row) {
  const auto& table = promoting_operands();
  for (const std::string& name : row.names) {
    auto it = table.find(name);
    if (it != table.end()) return &it->second;
  }
  return nullptr;
}

}  // namespace torch_tpu
