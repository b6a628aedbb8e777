// Builds one StableHLO module as MLIR text, in the generic op form. The text is a pure function of the calls made,
// so it can key the compile cache.
#pragma once

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/element_type.h"

namespace torch_tpu {

struct TensorType {
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> dims;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  std::string str() const;  // tensor<2x3xf32>
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

struct Value {
  std::string name;  // SSA name, e.g. %3 or %4#1
  TensorType type;
};

enum class CompareDirection { kEq, kNe, kLt, kLe, kGt, kGe };

// `%a, %b` / `tensor<..>, tensor<..>` / `array<i64: 1, 2>` spellings.
std::string join_names(const std::vector<Value>& values);
std::string join_types(const std::vector<TensorType>& types);
std::string i64_array(const std::vector<int64_t>& values);
std::string i64_list(const std::vector<int64_t>& values);  // [1, 2]
// A literal of `type`'s element type for use inside dense<...>: handles inf/nan and complex.
std::string scalar_literal(double value, ElementType type);

class HloBuilder {
 public:
  using RegionBody = std::function<std::vector<Value>(HloBuilder&, const std::vector<Value>& args)>;

  // The precision_config of every dot_general and convolution emitted from now on ("DEFAULT", "HIGH", "HIGHEST"; ""
  // emits none, which means DEFAULT). precision_attr() is the attribute text to append to such an op's attributes.
  void set_dot_precision(std::string precision) { dot_precision_ = std::move(precision); }
  std::string precision_attr() const;

  // Adds a parameter of @main. `alias_output` >= 0 donates it to that result (tf.aliasing_output).
  Value arg(const TensorType& type, int alias_output = -1);

  // Donates parameter `arg_index` to result `output` (its buffer is reused; the caller must not read it afterwards).
  void set_alias(size_t arg_index, int output);

  // The generic op form: %r = "name"(operands) ({regions}) {attrs} : (operand types) -> result types.
  std::vector<Value> op(const std::string& name, const std::vector<Value>& operands,
                        const std::vector<TensorType>& results, const std::string& attrs = "",
                        const std::vector<std::string>& regions = {});
  Value op1(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
            const std::string& attrs = "", const std::vector<std::string>& regions = {});

  // A region with one block whose arguments have `arg_types`; `body` emits ops and returns the values to yield.
  std::string region(const std::vector<TensorType>& arg_types, const RegionBody& body);

  // Common ops.
  Value constant(double value, ElementType dtype, const std::vector<int64_t>& dims = {});
  // A 1-D constant holding `values` (real element types).
  Value constant_values(const std::vector<double>& values, ElementType dtype);
  Value convert(const Value& v, ElementType dtype);
  Value reshape(const Value& v, const std::vector<int64_t>& dims);
  Value broadcast_in_dim(const Value& v, const std::vector<int64_t>& dims, const std::vector<int64_t>& mapping);
  // Numpy-style broadcast (trailing dimensions aligned) of `v` to `dims`.
  Value broadcast_to(const Value& v, const std::vector<int64_t>& dims);
  Value transpose(const Value& v, const std::vector<int64_t>& permutation);
  // How a value of @main was made by transpose (nullptr if it was not): a consumer that can read the source in the
  // transposed order (a host GEMM) uses the source and leaves the transpose dead.
  struct Transposed {
    Value source;
    std::vector<int64_t> permutation;
  };
  const Transposed* transposed(const Value& v) const;
  Value slice(const Value& v, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides = {});
  Value concatenate(const std::vector<Value>& values, int64_t dim);
  // `v` padded with the 0-d `fill`: `low`/`high` elements before/after each dim, `interior` between its elements.
  Value pad(const Value& v, const Value& fill, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
            const std::vector<int64_t>& interior);
  Value iota(const TensorType& type, int64_t dim);
  Value unary(const std::string& name, const Value& v);
  Value binary(const std::string& name, const Value& a, const Value& b);
  Value compare(CompareDirection dir, const Value& a, const Value& b);
  Value select(const Value& pred, const Value& on_true, const Value& on_false);
  Value dot_general(const Value& a, const Value& b, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract, const TensorType& result);
  // Reduces `v` over `dims` with the binary op `combiner` (e.g. "stablehlo.add") from `init`.
  Value reduce(const Value& v, const Value& init, const std::vector<int64_t>& dims, const std::string& combiner);
  Value dynamic_update_slice(const Value& operand, const Value& update, const std::vector<Value>& starts);
  // A typed-FFI custom call (api_version 4) of `target`; `attributes` is the body of its backend_config dictionary.
  Value custom_call(const std::string& target, const std::vector<Value>& operands, const TensorType& result,
                    const std::string& attributes = "");

  // Calls @`callee`, a function defined in `functions` (MLIR text of func.func definitions, added to the module once
  // per callee; its symbols must not clash with another's), on `operands`; its results have the types `results`.
  std::vector<Value> call(const std::string& callee, const std::string& functions, const std::vector<Value>& operands,
                          const std::vector<TensorType>& results);

  // The module text returning `results` from @main.
  std::string build(const std::vector<Value>& results) const;

  // Whether some element of `v` (a value of @main) is computed from one of `sources` other than from the element at
  // its own position of `same_place`: values that hold, position for position, the elements `v` will replace.
  // Those (and the values they reshape) may be used through elementwise ops and reshapes only; any other path to a
  // source counts. Values made before `first` (an id from next_id()) are not searched: they were made before any
  // source existed. A write may update its target in place only when this is false (see exec/tensor_program).
  bool reads_elsewhere(const Value& v, const std::vector<Value>& sources, const std::vector<Value>& same_place,
                       int first) const;
  // The id the next op's result will get.
  int next_id() const { return next_id_; }

 private:
  std::string fresh();

  std::string dot_precision_;

  // Reshapes and scalar broadcasts sink below elementwise ops (see builder.cpp): how a value of @main was made.
  struct Origin {
    Value source;
    bool scalar_broadcast = false;  // a broadcast of the 0-d `source`; else a reshape of `source`
  };
  using Emit = std::function<Value(const std::vector<Value>& operands, const std::vector<int64_t>& dims)>;
  const Origin* origin_of(const Value& v) const;
  Value elementwise(const std::vector<Value>& operands, const Emit& emit);
  Value convert_now(const Value& v, ElementType dtype);

  // How each op of @main was made (indexed by its id): its name and the ids of what it read, its regions' captures
  // included (arguments of @main as -1 - index). Only dependency queries read it.
  struct Made {
    std::string op;
    std::vector<int> inputs;
  };
  void note_made(const std::string& op, const std::vector<Value>& operands);
  std::vector<Made> made_;
  std::vector<std::vector<Value>> captures_;  // per open region: values of @main its ops read
  std::vector<Value> pending_captures_;       // captures of regions built for the next op

  std::unordered_map<std::string, Origin> origins_;
  std::unordered_map<std::string, Transposed> transposes_;

  int next_id_ = 0;
  std::vector<std::pair<TensorType, int>> args_;
  std::vector<std::pair<std::string, std::string>> functions_;  // callee -> definitions, in the order first called
  std::vector<std::ostringstream*> bodies_;  // innermost region last; empty = @main's body
  std::ostringstream main_body_;
  int indent_ = 4;
};

}  // namespace torch_tpu
