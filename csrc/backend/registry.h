// The op registry: every ATen overload served by a lowering row. A row names its ops' overloads (the functional one
// at least); the in-place and out= overloads of each are derived from PyTorch's schemas (`op_.overload`,
// `op.out` / `op.overload_out`). Registered with the dispatcher at load; a row naming an overload PyTorch does not
// have is reported, never silently skipped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lowering/table.h"

namespace torch_tpu {

struct RegisteredOverload {
  const LoweringRow* row = nullptr;
  bool derived = false;     // found from the schemas, not named by the row
  std::string functional;   // the overload it was derived from (itself when named)
};

// "aten::add_.Tensor" -> its row; the whole table, computed once.
const std::map<std::string, RegisteredOverload>& registered_overloads();
// The row serving `name` ("aten::add_.Tensor"), or nullptr.
const LoweringRow* registered_row(const std::string& name);
// The overload `name` was derived from ("aten::add.Scalar_out" -> "aten::add.Scalar"); `name` when named or unknown.
const std::string& functional_name(const std::string& name);
// Names rows list that PyTorch has no schema for (a misspelled overload would otherwise fall back unnoticed).
const std::vector<std::string>& unknown_row_names();

}  // namespace torch_tpu
