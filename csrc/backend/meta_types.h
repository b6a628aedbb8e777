// Output types of a lowering-table op from PyTorch's meta kernels. A meta call (often a Python meta kernel) costs
// more than the rest of an op's dispatch, and its result depends only on dtypes, shapes and non-tensor arguments,
// so results are cached under a key of exactly those.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <functional>
#include <string>
#include <vector>

#include "exec/op_record.h"

namespace torch_tpu {

// How an argument enters the meta key: a Scalar (or list of them) by kind, since changing learning rates or step
// sizes must reuse the entry; anything else by value.
struct MetaArgKind {
  bool scalar = false;
  bool scalar_list = false;
};

// The cached output types of `op` called with `args`, or a new meta call's. `before_meta` runs only when the meta
// kernel is called (checks that depend on nothing but the key). `scalars_by_value`: a Scalar sets the result's shape
// (arange, linspace), so its value is part of the key. nullptr when the op has no meta kernel and returns tensors.
OutTypes meta_out_types(const c10::OperatorHandle& op, const std::string& name, const std::vector<MetaArgKind>& kinds,
                        bool scalars_by_value, const std::vector<c10::IValue>& args,
                        const std::function<void()>& before_meta);

}  // namespace torch_tpu
