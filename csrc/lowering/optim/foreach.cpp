// The _foreach_* family and the fused optimizers, each call one program (one node of a fused graph), never a loop
// of per-tensor programs. A _foreach_ op applies an existing elementwise rule to element k of its list arguments:
// ElementContext presents that element's arguments to the rule as if the single-tensor op had been called. Scalar
// lists go up as one vector argument, so changing step sizes never recompiles and never costs a transfer each.
#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>

#include <map>

#include "lowering/table.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;

bool is_tensor_list(const c10::IValue& v) { return v.isTensorList(); }
// Scalar[] arrives as a list of numbers (typed double/int/bool lists, or a generic list of Scalars).
bool is_scalar_list(const c10::IValue& v) {
  if (v.isDoubleList() || v.isIntList() || v.isBoolList()) return true;
  if (!v.isList()) return false;
  const auto& elements = v.toListRef();
  return !elements.empty() && elements[0].isScalar();
}

c10::IValue scalar_list_element(const c10::IValue& v, size_t k) {
  if (v.isDoubleList()) return c10::Scalar(v.toDoubleList().get(k));
  if (v.isIntList()) return c10::Scalar(v.toIntList().get(k));
  if (v.isBoolList()) return c10::Scalar(v.toBoolList().get(k));
  return v.toListRef().at(k);
}

// The per-call state shared by every element: list arguments read once, scalar lists uploaded once.
struct ForeachArgs {
  OpContext& parent;
  std::map<size_t, std::vector<Value>> lists;  // tensor-list argument -> its element values
  std::map<size_t, Value> scalar_lists;        // scalar-list argument -> a 1-D f64 value
  std::map<size_t, Value> singles;             // single tensor argument -> its value

  const std::vector<Value>& list(size_t i) {
    auto it = lists.find(i);
    if (it == lists.end()) it = lists.emplace(i, parent.tensor_list(i)).first;
    return it->second;
  }
  const Value& scalar_list(size_t i) {
    auto it = scalar_lists.find(i);
    if (it == scalar_lists.end()) it = scalar_lists.emplace(i, parent.runtime_list(i, ElementType::kF64)).first;
    return it->second;
  }
  const Value& single(size_t i) {
    auto it = singles.find(i);
    if (it == singles.end()) it = singles.emplace(i, parent.tensor(i)).first;
    return it->second;
  }
};

// Where an element rule's argument comes from: a foreach argument (elementwise for lists) or a fixed value.
struct ArgFrom {
  int source = -1;
  c10::IValue fixed;
};

class ElementContext final : public OpContext {
 public:
  ElementContext(ForeachArgs& shared, size_t k, const std::string& name, const std::vector<ArgFrom>& mapping)
      : OpContext(shared.parent.b), shared_(shared), k_(k), name_(name), mapping_(mapping) {
    for (const ArgFrom& m : mapping_) {
      if (m.source < 0) {
        args_.push_back(m.fixed);
        continue;
      }
      const c10::IValue& v = shared_.parent.inspect(static_cast<size_t>(m.source));
      if (is_tensor_list(v)) {
        args_.push_back(v.toTensorVector().at(k_));
      } else if (is_scalar_list(v)) {
        args_.push_back(scalar_list_element(v, k_));
      } else {
        args_.push_back(v);
      }
    }
  }

  const std::string& op_name() const override { return name_; }
  size_t num_args() const override { return args_.size(); }
  const c10::IValue& arg(size_t i) const override {
    const ArgFrom& m = mapping_.at(i);
    if (m.source >= 0) (void)shared_.parent.arg(static_cast<size_t>(m.source));  // the value is used: say so
    return args_.at(i);
  }
  const c10::IValue& inspect(size_t i) const override { return args_.at(i); }
  Value tensor(size_t i) override {
    const ArgFrom& m = mapping_.at(i);
    TORCH_INTERNAL_ASSERT(m.source >= 0, name_, ": argument ", i, " is not a tensor");
    size_t s = static_cast<size_t>(m.source);
    if (is_tensor_list(shared_.parent.inspect(s))) return shared_.list(s).at(k_);
    return shared_.single(s);
  }
  std::vector<Value> tensor_list(size_t i) override {
    TORCH_INTERNAL_ASSERT(false, name_, ": element rules take no tensor lists");
    return {};
  }
  TensorType out(size_t i) const override { return shared_.parent.out(k_ + i); }
  bool out_defined(size_t i) const override { return shared_.parent.out_defined(k_ + i); }
  size_t num_outputs() const override { return 1; }
  ElementType promoted(const std::vector<size_t>& indices) const override { return result_type_of(*this, indices); }
  Value runtime_scalar(const c10::Scalar& value, ElementType dtype) override {
    return shared_.parent.runtime_scalar(value, dtype);
  }
  Value runtime_vector(const std::vector<c10::Scalar>& values, ElementType dtype) override {
    return shared_.parent.runtime_vector(values, dtype);
  }
  Value runtime_operand(size_t i, ElementType dtype, const std::vector<int64_t>& dims) override {
    const ArgFrom& m = mapping_.at(i);
    if (m.source >= 0 && is_scalar_list(shared_.parent.inspect(static_cast<size_t>(m.source)))) {
      const Value& all = shared_.scalar_list(static_cast<size_t>(m.source));
      int64_t k = static_cast<int64_t>(k_);
      Value one = b.reshape(b.slice(all, {k}, {k + 1}), {});
      return b.broadcast_to(b.convert(one, dtype), dims);
    }
    // A single number argument of the foreach op: taken at run time as the op's own argument.
    if (m.source >= 0 && !shared_.parent.is_tensor(static_cast<size_t>(m.source))) {
      return shared_.parent.runtime_operand(static_cast<size_t>(m.source), dtype, dims);
    }
    return OpContext::runtime_operand(i, dtype, dims);
  }
  void check(const Value& bad, const std::string& message, bool index_error, std::optional<Value> culprit) override {
    shared_.parent.check(bad, message, index_error, culprit);
  }
  void update_arg(size_t i, const Value& value) override {
    TORCH_INTERNAL_ASSERT(false, name_, ": element rules do not update arguments");
  }

 private:
  ForeachArgs& shared_;
  size_t k_;
  std::string name_;
  const std::vector<ArgFrom>& mapping_;
  std::vector<c10::IValue> args_;
};

// The rule of a _foreach_ overload: `base`'s rule applied to every element. `mapping` empty = positional.
LoweringRule foreach_rule(const std::string& base, std::vector<ArgFrom> mapping = {}) {
  return [base, mapping](OpContext& c) -> V {
    const LoweringRow* row = find_row(base);
    TORCH_INTERNAL_ASSERT(row != nullptr, "no lowering rule for ", base);
    std::vector<ArgFrom> map = mapping;
    if (map.empty()) {
      for (size_t i = 0; i < c.num_args(); ++i) map.push_back(ArgFrom{static_cast<int>(i), {}});
    }
    ForeachArgs shared{c, {}, {}, {}};
    V results;
    for (size_t k = 0; k < c.num_outputs(); ++k) {
      ElementContext element(shared, k, base, map);
      V r = row->rule(element);
      TORCH_INTERNAL_ASSERT(r.size() == 1, base, ": element rule returned ", r.size(), " values");
      results.push_back(r[0]);
    }
    return results;
  };
}

// Names of a family's functional and in-place overload: ("_foreach_add", "List") -> _foreach_add.List, _add_.List.
std::vector<std::string> overloads(const std::string& family, const std::string& overload) {
  std::string dot = overload.empty() ? "" : "." + overload;
  return {family + dot, family + "_" + dot};
}

void add_family(std::vector<LoweringRow>& rows, const std::string& family,
                const std::vector<std::pair<std::string, std::string>>& overload_to_base) {
  for (const auto& [overload, base] : overload_to_base) rows.push_back({overloads(family, overload), foreach_rule(base)});
}

}  // namespace

void add_foreach_rules(std::vector<LoweringRow>& rows) {
  add_family(rows, "_foreach_add", {{"List", "add.Tensor"}, {"Tensor", "add.Tensor"}, {"Scalar", "add.Scalar"},
                                     {"ScalarList", "add.Scalar"}});
  // PyTorch has no _foreach_sub.Tensor (a tensor subtrahend for every entry).
  add_family(rows, "_foreach_sub", {{"List", "sub.Tensor"}, {"Scalar", "sub.Scalar"}, {"ScalarList", "sub.Scalar"}});
  for (const char* op : {"mul", "div"}) {
    std::string t = std::string(op) + ".Tensor", s = std::string(op) + ".Scalar";
    add_family(rows, std::string("_foreach_") + op, {{"List", t}, {"Tensor", t}, {"Scalar", s}, {"ScalarList", s}});
  }
  for (const char* op : {"maximum", "minimum"}) {
    add_family(rows, std::string("_foreach_") + op, {{"List", op}, {"Scalar", op}, {"ScalarList", op}});
  }
  for (const char* op : {"clamp_min", "clamp_max"}) {
    std::string t = std::string(op) + ".Tensor";
    add_family(rows, std::string("_foreach_") + op, {{"List", t}, {"Scalar", op}, {"ScalarList", op}});
  }
  add_family(rows, "_foreach_pow", {{"List", "pow.Tensor_Tensor"}, {"Scalar", "pow.Tensor_Scalar"},
                                    {"ScalarList", "pow.Tensor_Scalar"}});
  add_family(rows, "_foreach_lerp", {{"List", "lerp.Tensor"}, {"Scalar", "lerp.Scalar"}, {"ScalarList", "lerp.Scalar"}});
  add_family(rows, "_foreach_addcmul", {{"Scalar", "addcmul"}, {"ScalarList", "addcmul"}});
  add_family(rows, "_foreach_addcdiv", {{"Scalar", "addcdiv"}, {"ScalarList", "addcdiv"}});
  for (const char* op : {"sqrt", "neg", "abs", "exp", "expm1", "log", "log1p", "sign", "reciprocal", "sigmoid",
                         "tanh", "sin", "cos"}) {
    add_family(rows, std::string("_foreach_") + op, {{"", op}});
  }
  rows.push_back({{"_foreach_zero_"}, foreach_rule("zero_")});
  // _foreach_norm(self, ord, dtype) is linalg_vector_norm(self, ord, dim=None, keepdim=False, dtype) per tensor.
  rows.push_back({{"_foreach_norm.Scalar"},
                  foreach_rule("linalg_vector_norm", {ArgFrom{0, {}}, ArgFrom{1, {}}, ArgFrom{-1, c10::IValue()},
                                                      ArgFrom{-1, c10::IValue(false)}, ArgFrom{2, {}}})});
}

}  // namespace torch_tpu
