#include "hlo/builder.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "runtime/error.h"

namespace torch_tpu {
namespace {

std::string float_bits_hex(double value, ElementType type) {
  // Non-finite values have no decimal spelling in MLIR: write their bit patterns.
  bool neg = std::signbit(value);
  bool nan = std::isnan(value);
  unsigned long long bits = 0;
  switch (type) {
    case ElementType::kF16: bits = nan ? 0x7E00 : 0x7C00; if (neg && !nan) bits |= 0x8000; break;
    case ElementType::kBF16: bits = nan ? 0x7FC0 : 0x7F80; if (neg && !nan) bits |= 0x8000; break;
    case ElementType::kF32: bits = nan ? 0x7FC00000ULL : 0x7F800000ULL; if (neg && !nan) bits |= 0x80000000ULL; break;
    case ElementType::kF8E5M2: bits = nan ? 0x7E : 0x7C; if (neg && !nan) bits |= 0x80; break;
    // No infinity in e4m3fn: an infinite constant is its largest value, as convert_now saturates (NaN is 0x7F).
    case ElementType::kF8E4M3FN: bits = nan ? 0x7F : neg ? 0xFE : 0x7E; break;
    // The fnuz types have one NaN and no infinity; XLA and PyTorch convert an infinity to it.
    case ElementType::kF8E5M2FNUZ:
    case ElementType::kF8E4M3FNUZ: bits = 0x80; break;
    default:
      bits = nan ? 0x7FF8000000000000ULL : 0x7FF0000000000000ULL;
      if (neg && !nan) bits |= 0x8000000000000000ULL;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llX", bits);
  return buf;
}

std::string float_literal(double value, ElementType type) {
  if (!std::isfinite(value)) return float_bits_hex(value, type);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17e", value);
  return buf;
}

const char* direction_name(CompareDirection d) {
  switch (d) {
    case CompareDirection::kEq: return "EQ";
    case CompareDirection::kNe: return "NE";
    case CompareDirection::kLt: return "LT";
    case CompareDirection::kLe: return "LE";
    case CompareDirection::kGt: return "GT";
    case CompareDirection::kGe: return "GE";
  }
  return "EQ";
}

// The id of a value's name in the dependency table: %12 and %12#1 are 12, %arg3 is -4; region arguments (%b5) and
// anything else are kNotTracked.
constexpr int kNotTracked = std::numeric_limits<int>::min();
int value_id(const std::string& name) {
  if (name.size() < 2 || name[0] != '%') return kNotTracked;
  const bool is_arg = name.compare(1, 3, "arg") == 0;
  const size_t from = is_arg ? 4 : 1;
  if (from >= name.size() || !std::isdigit(static_cast<unsigned char>(name[from]))) return kNotTracked;
  int id = 0;
  for (size_t i = from; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    id = id * 10 + (name[i] - '0');
  }
  return is_arg ? -1 - id : id;
}

// Ops whose every result element is computed from the operands' elements at the same position (or, for a reshape,
// at the same position in row-major order): a value made by these alone from a read of a target's own elements
// holds, at each position, what that position held.
bool keeps_positions(const std::string& op) {
  static const std::set<std::string> ops = {
      "stablehlo.abs", "stablehlo.add", "stablehlo.and", "stablehlo.atan2",
      "stablehlo.cbrt", "stablehlo.ceil", "stablehlo.clamp", "stablehlo.compare", "stablehlo.complex",
      "stablehlo.convert", "stablehlo.cosine", "stablehlo.divide", "stablehlo.exponential",
      "stablehlo.exponential_minus_one", "stablehlo.floor", "stablehlo.imag", "stablehlo.is_finite", "stablehlo.log",
      "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.multiply",
      "stablehlo.negate", "stablehlo.not", "stablehlo.or", "stablehlo.popcnt", "stablehlo.power", "stablehlo.real",
      "stablehlo.reduce_precision", "stablehlo.remainder", "stablehlo.reshape", "stablehlo.round_nearest_afz",
      "stablehlo.round_nearest_even", "stablehlo.rsqrt", "stablehlo.select", "stablehlo.shift_left",
      "stablehlo.shift_right_arithmetic", "stablehlo.shift_right_logical", "stablehlo.sign", "stablehlo.sine",
      "stablehlo.sqrt", "stablehlo.subtract", "stablehlo.tan", "stablehlo.tanh", "stablehlo.xor"};
  return ops.count(op) > 0;
}

const char* compare_type(ElementType t) {
  if (is_floating(t) || is_complex(t)) return "FLOAT";
  if (is_signed_integer(t)) return "SIGNED";
  return "UNSIGNED";
}

}  // namespace

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  return s + mlir_name(dtype) + ">";
}

std::string join_names(const std::vector<Value>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i].name;
  return s;
}

std::string join_types(const std::vector<TensorType>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return s;
}

std::string i64_array(const std::vector<int64_t>& values) {
  std::string s = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : ": ") + std::to_string(values[i]);
  return s + ">";
}

std::string i64_list(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

std::string scalar_literal(double value, ElementType type) {
  if (type == ElementType::kPred) return value != 0 ? "true" : "false";
  if (is_floating(type)) return float_literal(value, type);
  if (is_complex(type)) {
    ElementType part = type == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64;
    return "(" + float_literal(value, part) + ", " + float_literal(0.0, part) + ")";
  }
  if (is_unsigned_integer(type)) return std::to_string(static_cast<unsigned long long>(value));
  return std::to_string(static_cast<long long>(value));
}

std::string HloBuilder::fresh() { return "%" + std::to_string(next_id_++); }

Value HloBuilder::arg(const TensorType& type, int alias_output) {
  std::string name = "%arg" + std::to_string(args_.size());
  args_.emplace_back(type, alias_output);
  return {name, type};
}

void HloBuilder::set_alias(size_t arg_index, int output) { args_.at(arg_index).second = output; }

std::vector<Value> HloBuilder::op(const std::string& name, const std::vector<Value>& operands,
                                  const std::vector<TensorType>& results, const std::string& attrs,
                                  const std::vector<std::string>& regions) {
  std::ostringstream& out = bodies_.empty() ? main_body_ : *bodies_.back();
  note_made(name, operands);
  std::string id = fresh();
  out << std::string(indent_, ' ');
  if (results.size() == 1) {
    out << id << " = ";
  } else if (results.size() > 1) {
    out << id << ":" << results.size() << " = ";
  }
  out << "\"" << name << "\"(" << join_names(operands) << ")";
  if (!regions.empty()) {
    out << " (";
    for (size_t i = 0; i < regions.size(); ++i) out << (i ? ", " : "") << regions[i];
    out << ")";
  }
  if (!attrs.empty()) out << " {" << attrs << "}";
  std::vector<TensorType> operand_types;
  for (const auto& v : operands) operand_types.push_back(v.type);
  out << " : (" << join_types(operand_types) << ") -> ";
  if (results.size() == 1) {
    out << results[0].str();
  } else {
    out << "(" << join_types(results) << ")";
  }
  out << "\n";
  std::vector<Value> values;
  for (size_t i = 0; i < results.size(); ++i) {
    values.push_back({results.size() == 1 ? id : id + "#" + std::to_string(i), results[i]});
  }
  return values;
}

Value HloBuilder::op1(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
                      const std::string& attrs, const std::vector<std::string>& regions) {
  return op(name, operands, {result}, attrs, regions)[0];
}

void HloBuilder::note_made(const std::string& op, const std::vector<Value>& operands) {
  std::vector<Value> read = operands;
  read.insert(read.end(), pending_captures_.begin(), pending_captures_.end());
  pending_captures_.clear();
  auto is_main_value = [&](int id) {
    return id != kNotTracked && (id < 0 || (static_cast<size_t>(id) < made_.size() && !made_[id].op.empty()));
  };
  if (!bodies_.empty()) {  // an op inside a region: what it reads of @main is read by the op that takes the region
    for (const Value& v : read) {
      if (is_main_value(value_id(v.name))) captures_.back().push_back(v);
    }
    made_.resize(static_cast<size_t>(next_id_) + 1);
    return;
  }
  Made m;
  m.op = op;
  for (const Value& v : read) {
    int id = value_id(v.name);
    if (is_main_value(id)) m.inputs.push_back(id);
  }
  made_.resize(static_cast<size_t>(next_id_) + 1);
  made_[static_cast<size_t>(next_id_)] = std::move(m);
}

bool HloBuilder::reads_elsewhere(const Value& v, const std::vector<Value>& sources,
                                 const std::vector<Value>& same_place, int first) const {
  std::set<int> source_ids;
  for (const Value& s : sources) source_ids.insert(value_id(s.name));
  std::set<int> allowed;  // same_place and what each is a reshape of
  for (const Value& p : same_place) {
    for (int id = value_id(p.name); id >= 0 && allowed.insert(id).second;) {
      const Made& m = made_.at(static_cast<size_t>(id));
      if (m.op != "stablehlo.reshape" || m.inputs.size() != 1) break;
      id = m.inputs[0];
    }
  }
  // Depth-first over (value, reached through position-keeping ops only); each pair visited once.
  std::set<std::pair<int, bool>> seen;
  std::vector<std::pair<int, bool>> todo{{value_id(v.name), true}};
  while (!todo.empty()) {
    auto [id, keeps] = todo.back();
    todo.pop_back();
    if (id == kNotTracked || !seen.insert({id, keeps}).second) continue;
    if (keeps && allowed.count(id) > 0) continue;
    if (source_ids.count(id) > 0) return true;
    if (id < 0 || id < first || static_cast<size_t>(id) >= made_.size()) continue;
    const Made& m = made_[static_cast<size_t>(id)];
    const bool next = keeps && keeps_positions(m.op);
    for (int in : m.inputs) todo.emplace_back(in, next);
  }
  return false;
}

std::string HloBuilder::region(const std::vector<TensorType>& arg_types, const RegionBody& body) {
  captures_.emplace_back();
  std::ostringstream text;
  std::vector<Value> args;
  std::string header = "^bb0(";
  for (size_t i = 0; i < arg_types.size(); ++i) {
    Value v{"%b" + std::to_string(next_id_++), arg_types[i]};
    header += (i ? ", " : "") + v.name + ": " + v.type.str();
    args.push_back(v);
  }
  header += "):";
  bodies_.push_back(&text);
  indent_ += 2;
  std::vector<Value> yielded;
  try {
    yielded = body(*this, args);
  } catch (...) {
    bodies_.pop_back();
    captures_.pop_back();
    indent_ -= 2;
    throw;
  }
  for (const Value& v : yielded) {
    int id = value_id(v.name);
    if (id != kNotTracked && (id < 0 || (static_cast<size_t>(id) < made_.size() && !made_[id].op.empty()))) {
      captures_.back().push_back(v);
    }
  }
  std::vector<TensorType> types;
  for (const auto& v : yielded) types.push_back(v.type);
  text << std::string(indent_, ' ') << "\"stablehlo.return\"(" << join_names(yielded) << ") : (" << join_types(types)
       << ") -> ()\n";
  bodies_.pop_back();
  pending_captures_.insert(pending_captures_.end(), captures_.back().begin(), captures_.back().end());
  captures_.pop_back();
  indent_ -= 2;
  return "{\n" + std::string(indent_, ' ') + header + "\n" + text.str() + std::string(indent_, ' ') + "}";
}

Value HloBuilder::constant(double value, ElementType dtype, const std::vector<int64_t>& dims) {
  TensorType t{dtype, dims};
  return op1("stablehlo.constant", {}, t, "value = dense<" + scalar_literal(value, dtype) + "> : " + t.str());
}

Value HloBuilder::pad(const Value& v, const Value& fill, const std::vector<int64_t>& low,
                       const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  TensorType t = v.type;
  for (int64_t i = 0; i < t.rank(); ++i) {
    int64_t n = t.dims[i];
    t.dims[i] = low[i] + high[i] + n + (n > 0 ? (n - 1) * interior[i] : 0);
  }
  return op1("stablehlo.pad", {v, fill}, t,
             "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                 ", interior_padding = " + i64_array(interior));
}

Value HloBuilder::constant_values(const std::vector<double>& values, ElementType dtype) {
  TensorType t{dtype, {static_cast<int64_t>(values.size())}};
  std::string text = "value = dense<[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + scalar_literal(values[i], dtype);
  return op1("stablehlo.constant", {}, t, text + "]> : " + t.str());
}

Value HloBuilder::convert(const Value& v, ElementType dtype) {
  if (v.type.dtype == dtype) return v;
  return elementwise({v}, [&](const std::vector<Value>& o, const std::vector<int64_t>&) { return convert_now(o[0], dtype); });
}

Value HloBuilder::convert_now(const Value& v, ElementType dtype) {
  // Float -> narrow integer goes through s64 so out-of-range values wrap as a C cast does on the CPU, instead of
  // saturating as XLA's convert would.
  bool narrow_int = (is_signed_integer(dtype) || is_unsigned_integer(dtype)) && element_size(dtype) < 8;
  // pred -> float goes through u8: XLA rewrites convert(pred) * x as select(pred, x, 0), which loses the NaN that
  // 0 * inf or 0 * nan gives in PyTorch.
  if (v.type.dtype == ElementType::kPred && (is_floating(dtype) || is_complex(dtype))) {
    return op1("stablehlo.convert", {op1("stablehlo.convert", {v}, {ElementType::kU8, v.type.dims})}, {dtype, v.type.dims});
  }
  if (is_floating(v.type.dtype) && narrow_int) {
    return op1("stablehlo.convert", {op1("stablehlo.convert", {v}, {ElementType::kS64, v.type.dims})},
               {dtype, v.type.dims});
  }
  // -> float8_e4m3fn saturates at +-448 (its largest finite value), infinities included, as PyTorch's conversion
  // does; XLA's gives NaN past it. Sources that cannot exceed 448 (8-bit integers, e4m3fnuz) need no clamp.
  if (dtype == ElementType::kF8E4M3FN && v.type.dtype != ElementType::kF8E4M3FNUZ &&
      (is_floating(v.type.dtype) || element_size(v.type.dtype) > 1)) {
    Value limited = op1("stablehlo.clamp", {constant(-448, v.type.dtype), v, constant(448, v.type.dtype)}, v.type);
    return op1("stablehlo.convert", {limited}, {dtype, v.type.dims});
  }
  return op1("stablehlo.convert", {v}, {dtype, v.type.dims});
}

Value HloBuilder::reshape(const Value& v, const std::vector<int64_t>& dims) {
  if (v.type.dims == dims) return v;
  TensorType t{v.type.dtype, dims};
  if (t.numel() != v.type.numel()) {
    fail(ErrorCode::kInvalidArgument, "hlo.reshape", "cannot reshape " + v.type.str() + " to " + t.str());
  }
  if (!bodies_.empty()) return op1("stablehlo.reshape", {v}, t);
  Value source = v;
  if (const Origin* o = origin_of(v)) {
    if (o->scalar_broadcast) return broadcast_in_dim(o->source, dims, {});
    source = o->source;  // a reshape of a reshape is one reshape
    if (source.type.dims == dims) return source;
  }
  Value r = op1("stablehlo.reshape", {source}, t);
  origins_[r.name] = Origin{source, false};
  return r;
}

Value HloBuilder::broadcast_in_dim(const Value& v, const std::vector<int64_t>& dims,
                                   const std::vector<int64_t>& mapping) {
  bool identity = dims == v.type.dims;
  for (size_t i = 0; identity && i < mapping.size(); ++i) identity = mapping[i] == static_cast<int64_t>(i);
  if (identity) return v;
  const Origin* o = bodies_.empty() ? origin_of(v) : nullptr;
  if (o != nullptr && o->scalar_broadcast) return broadcast_in_dim(o->source, dims, {});
  Value r = op1("stablehlo.broadcast_in_dim", {v}, {v.type.dtype, dims}, "broadcast_dimensions = " + i64_array(mapping));
  if (bodies_.empty() && v.type.rank() == 0) origins_[r.name] = Origin{v, true};
  return r;
}

Value HloBuilder::broadcast_to(const Value& v, const std::vector<int64_t>& dims) {
  if (v.type.dims == dims) return v;
  int64_t offset = static_cast<int64_t>(dims.size()) - v.type.rank();
  if (offset < 0) {
    fail(ErrorCode::kInvalidArgument, "hlo.broadcast_to", "cannot broadcast " + v.type.str() + " to lower rank");
  }
  std::vector<int64_t> mapping;
  for (int64_t i = 0; i < v.type.rank(); ++i) mapping.push_back(offset + i);
  return broadcast_in_dim(v, dims, mapping);
}

Value HloBuilder::transpose(const Value& v, const std::vector<int64_t>& permutation) {
  bool identity = true;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity = identity && permutation[i] == static_cast<int64_t>(i);
    dims.push_back(v.type.dims[permutation[i]]);
  }
  if (identity) return v;
  Value r = op1("stablehlo.transpose", {v}, {v.type.dtype, dims}, "permutation = " + i64_array(permutation));
  if (bodies_.empty()) transposes_[r.name] = Transposed{v, permutation};
  return r;
}

const HloBuilder::Transposed* HloBuilder::transposed(const Value& v) const {
  auto it = transposes_.find(v.name);
  return it == transposes_.end() ? nullptr : &it->second;
}

Value HloBuilder::slice(const Value& v, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                        const std::vector<int64_t>& strides) {
  std::vector<int64_t> st = strides.empty() ? std::vector<int64_t>(start.size(), 1) : strides;
  std::vector<int64_t> dims;
  bool whole = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + st[i] - 1) / st[i] : 0;
    dims.push_back(n);
    whole = whole && start[i] == 0 && limit[i] == v.type.dims[i] && st[i] == 1;
  }
  if (whole) return v;
  return op1("stablehlo.slice", {v}, {v.type.dtype, dims},
             "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                 ", strides = " + i64_array(st));
}

Value HloBuilder::concatenate(const std::vector<Value>& values, int64_t dim) {
  TensorType t = values.at(0).type;
  t.dims[dim] = 0;
  for (const auto& v : values) t.dims[dim] += v.type.dims[dim];
  return op1("stablehlo.concatenate", values, t, "dimension = " + std::to_string(dim) + " : i64");
}

Value HloBuilder::iota(const TensorType& type, int64_t dim) {
  return op1("stablehlo.iota", {}, type, "iota_dimension = " + std::to_string(dim) + " : i64");
}

const HloBuilder::Origin* HloBuilder::origin_of(const Value& v) const {
  auto it = origins_.find(v.name);
  return it == origins_.end() ? nullptr : &it->second;
}

// An elementwise op commutes with a reshape of all its operands and with a broadcast of a scalar: when every
// operand of @main is a reshape of a value of one shape S or a broadcast scalar, the op is emitted on S (or on the
// scalars) and its result reshaped (broadcast) back. Storages are flat buffers, so an update of a 2-D parameter
// otherwise computes reshape(f(reshape(p))): XLA-CPU then fuses the reshape into the kernel, cannot write the
// result into the donated buffer, and writes a fresh temporary (page faults each run) plus a copy; in-place updates
// of 2-D tensors ran 10x slower than of 1-D ones. The values are bit-identical either way.
Value HloBuilder::elementwise(const std::vector<Value>& operands, const Emit& emit) {
  const std::vector<int64_t>& dims = operands.at(0).type.dims;
  if (!bodies_.empty()) return emit(operands, dims);
  std::vector<Origin> origins;  // copies: emitting below adds to origins_
  const Origin* shaped = nullptr;  // a reshaped operand (origins_ keeps element addresses when it grows)
  for (const Value& v : operands) {
    const Origin* o = origin_of(v);
    if (o == nullptr) return emit(operands, dims);
    origins.push_back(*o);
    if (o->scalar_broadcast) continue;
    if (shaped != nullptr && shaped->source.type.dims != o->source.type.dims) return emit(operands, dims);
    shaped = o;
  }
  if (shaped == nullptr) {  // all broadcast scalars
    std::vector<Value> scalars;
    for (const Origin& o : origins) scalars.push_back(o.source);
    return broadcast_in_dim(emit(scalars, {}), dims, {});
  }
  std::vector<int64_t> source_dims = shaped->source.type.dims;
  std::vector<Value> sources;
  for (const Origin& o : origins) {
    sources.push_back(o.scalar_broadcast ? broadcast_in_dim(o.source, source_dims, {}) : o.source);
  }
  return reshape(emit(sources, source_dims), dims);
}

Value HloBuilder::unary(const std::string& name, const Value& v) {
  return elementwise({v}, [&](const std::vector<Value>& o, const std::vector<int64_t>&) { return op1(name, o, o[0].type); });
}

Value HloBuilder::binary(const std::string& name, const Value& a, const Value& b) {
  return elementwise({a, b}, [&](const std::vector<Value>& o, const std::vector<int64_t>&) { return op1(name, o, o[0].type); });
}

Value HloBuilder::compare(CompareDirection dir, const Value& a, const Value& b) {
  std::string attrs = std::string("comparison_direction = #stablehlo<comparison_direction ") + direction_name(dir) +
                      ">, compare_type = #stablehlo<comparison_type " + compare_type(a.type.dtype) + ">";
  return elementwise({a, b}, [&](const std::vector<Value>& o, const std::vector<int64_t>& d) {
    return op1("stablehlo.compare", o, {ElementType::kPred, d}, attrs);
  });
}

Value HloBuilder::select(const Value& pred, const Value& on_true, const Value& on_false) {
  return elementwise({pred, on_true, on_false},
                     [&](const std::vector<Value>& o, const std::vector<int64_t>&) { return op1("stablehlo.select", o, o[1].type); });
}

Value HloBuilder::dot_general(const Value& a, const Value& b, const std::vector<int64_t>& lhs_batch,
                              const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                              const std::vector<int64_t>& rhs_contract, const TensorType& result) {
  std::string attrs = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " + i64_list(lhs_batch) +
                      ", rhs_batching_dimensions = " + i64_list(rhs_batch) +
                      ", lhs_contracting_dimensions = " + i64_list(lhs_contract) +
                      ", rhs_contracting_dimensions = " + i64_list(rhs_contract) + ">" + precision_attr();
  return op1("stablehlo.dot_general", {a, b}, result, attrs);
}

std::string HloBuilder::precision_attr() const {
  if (dot_precision_.empty()) return "";
  std::string one = "#stablehlo<precision " + dot_precision_ + ">";
  return ", precision_config = [" + one + ", " + one + "]";
}

Value HloBuilder::reduce(const Value& v, const Value& init, const std::vector<int64_t>& dims,
                         const std::string& combiner) {
  TensorType scalar{v.type.dtype, {}};
  std::string body = region({scalar, scalar}, [&](HloBuilder& b, const std::vector<Value>& args) {
    return std::vector<Value>{b.op1(combiner, {args[0], args[1]}, scalar)};
  });
  std::vector<int64_t> out_dims;
  for (int64_t i = 0; i < v.type.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced = reduced || d == i;
    if (!reduced) out_dims.push_back(v.type.dims[i]);
  }
  return op1("stablehlo.reduce", {v, init}, {v.type.dtype, out_dims}, "dimensions = " + i64_array(dims), {body});
}

Value HloBuilder::dynamic_update_slice(const Value& operand, const Value& update, const std::vector<Value>& starts) {
  std::vector<Value> operands{operand, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op1("stablehlo.dynamic_update_slice", operands, operand.type);
}

Value HloBuilder::custom_call(const std::string& target, const std::vector<Value>& operands, const TensorType& result,
                              const std::string& attributes) {
  return op1("stablehlo.custom_call", operands, result,
             "call_target_name = \"" + target + "\", api_version = 4 : i32, backend_config = {" + attributes + "}");
}

std::vector<Value> HloBuilder::call(const std::string& callee, const std::string& functions,
                                    const std::vector<Value>& operands, const std::vector<TensorType>& results) {
  if (results.empty()) fail(ErrorCode::kInvalidArgument, "hlo.call", "@" + callee + " must return at least one value");
  bool known = false;
  for (const auto& f : functions_) known = known || f.first == callee;
  if (!known) functions_.emplace_back(callee, functions);
  return op("func.call", operands, results, "callee = @" + callee);
}

std::string HloBuilder::build(const std::vector<Value>& results) const {
  std::ostringstream out;
  out << "module @torch_tpu {\n  func.func @main(";
  for (size_t i = 0; i < args_.size(); ++i) {
    out << (i ? ", " : "") << "%arg" << i << ": " << args_[i].first.str();
    if (args_[i].second >= 0) out << " {tf.aliasing_output = " << args_[i].second << " : i32}";
  }
  std::vector<TensorType> types;
  for (const auto& v : results) types.push_back(v.type);
  out << ") -> (" << join_types(types) << ") {\n";
  out << main_body_.str();
  out << "    \"func.return\"(" << join_names(results) << ") : (" << join_types(types) << ") -> ()\n";
  out << "  }\n";
  for (const auto& f : functions_) out << f.second << "\n";
  out << "}\n";
  return out.str();
}

}  // namespace torch_tpu
