#include "backend/registry.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <optional>
#include <set>
#include <tuple>

#include "backend/lowered_op.h"

namespace torch_tpu {
namespace {

std::pair<std::string, std::string> split_name(const std::string& name) {
  auto dot = name.find('.');
  if (dot == std::string::npos) return {name, ""};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

std::optional<c10::OperatorHandle> find_op(const std::string& base, const std::string& overload) {
  return c10::Dispatcher::singleton().findSchema({"aten::" + base, overload});
}
bool has_schema(const std::string& base, const std::string& overload) { return find_op(base, overload).has_value(); }

std::vector<size_t> written_arguments(const c10::FunctionSchema& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.arguments().size(); ++i) {
    const c10::AliasInfo* a = s.arguments()[i].alias_info();
    if (a != nullptr && a->isWrite()) out.push_back(i);
  }
  return out;
}

// Whether `variant` (an in-place or out= overload) writes exactly what `functional` returns, so the functional row's
// rule serves it: a functional op that writes nothing; in place, the first argument as its one result; out=, one
// trailing written argument per result after the functional op's own arguments.
bool serves(const c10::FunctionSchema& functional, const c10::FunctionSchema& variant, bool in_place) {
  if (!written_arguments(functional).empty()) return false;
  for (size_t i = 0; i < functional.arguments().size(); ++i) {  // the same arguments in the same places
    if (i >= variant.arguments().size() || variant.arguments()[i].name() != functional.arguments()[i].name()) {
      return false;
    }
  }
  const std::vector<size_t> written = written_arguments(variant);
  const size_t results = functional.returns().size();
  if (in_place) return results == 1 && written == std::vector<size_t>{0};
  if (written.size() != results || variant.arguments().size() != functional.arguments().size() + results) return false;
  for (size_t k = 0; k < results; ++k) {
    if (written[k] != functional.arguments().size() + k) return false;
  }
  return true;
}

std::string joined(const std::string& base, const std::string& overload) {
  return overload.empty() ? base : base + "." + overload;
}

struct Registry {
  std::map<std::string, RegisteredOverload> overloads;
  std::vector<std::string> unknown;
};

Registry build() {
  Registry r;
  // Named overloads first: a name a row lists always wins over one derived from another row.
  for (const LoweringRow& row : lowering_table()) {
    for (const std::string& name : row.names) {
      auto [base, overload] = split_name(name);
      if (!has_schema(base, overload)) {
        r.unknown.push_back(name);
        continue;
      }
      r.overloads.emplace("aten::" + name, RegisteredOverload{&row, false, "aten::" + name});
    }
  }
  for (const LoweringRow& row : lowering_table()) {
    // A row serving several ops (index_put and _index_put_impl_) may tell them apart by their argument count: an
    // out= argument would look like another op's argument. Only rows of one op get derived overloads.
    std::set<std::string> ops;
    for (const std::string& name : row.names) {
      std::string base = split_name(name).first;
      if (!base.empty() && base.back() == '_') base.pop_back();
      ops.insert(base);
    }
    // Foreach rows dispatch on the name they were called by (their elementwise counterpart's row).
    if (ops.size() != 1 || ops.begin()->rfind("_foreach_", 0) == 0) continue;
    for (const std::string& name : row.names) {
      auto [base, overload] = split_name(name);
      if (base.empty() || base.back() == '_' || overload == "out" ||
          (overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0)) {
        continue;  // already an in-place or out= overload
      }
      std::optional<c10::OperatorHandle> functional = find_op(base, overload);
      if (!functional) continue;
      const std::tuple<std::string, std::string, bool> variants[] = {
          {base + "_", overload, true}, {base, overload.empty() ? "out" : overload + "_out", false}};
      for (const auto& [vbase, voverload, in_place] : variants) {
        std::optional<c10::OperatorHandle> variant = find_op(vbase, voverload);
        if (!variant || !serves(functional->schema(), variant->schema(), in_place)) continue;
        r.overloads.emplace("aten::" + joined(vbase, voverload), RegisteredOverload{&row, true, "aten::" + name});
      }
    }
  }
  return r;
}

const Registry& registry() {
  static const Registry* r = new Registry(build());
  return *r;
}

}  // namespace

const std::map<std::string, RegisteredOverload>& registered_overloads() { return registry().overloads; }

const LoweringRow* registered_row(const std::string& name) {
  const auto& all = registry().overloads;
  auto it = all.find(name.rfind("aten::", 0) == 0 ? name : "aten::" + name);
  return it == all.end() ? nullptr : it->second.row;
}

const std::vector<std::string>& unknown_row_names() { return registry().unknown; }

const std::string& functional_name(const std::string& name) {
  const auto& all = registry().overloads;
  auto it = all.find(name);
  return it == all.end() ? name : it->second.functional;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const auto& [name, entry] : registered_overloads()) {
    m.impl(name.substr(6).c_str(), torch::CppFunction::makeFromBoxedFunction<&run_lowered>());
  }
}

}  // namespace torch_tpu
