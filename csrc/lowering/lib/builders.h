// Builders several rule families share (gathers and scatters along one dim, prefix scans): pure StableHLO, no torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu {

// 0, 1, ..., n - 1 (every dim of a rank-n value).
inline std::vector<int64_t> iota_dims(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(i);
  return out;
}

// x gathered along dim d at the s64 positions idx ([n]): the result has n in place of dim d.
Value gather_dim(HloBuilder& b, const Value& x, const Value& idx, int64_t d);
// Adds the slices of `updates` along dim d into `into` at the s64 positions idx ([n], duplicates accumulate).
Value scatter_add_dim(HloBuilder& b, const Value& into, const Value& updates, const Value& idx, int64_t d);
// Inclusive scan along `dim` with a binary StableHLO op ("stablehlo.add", "stablehlo.maximum", ...) and its identity.
Value prefix_reduce(HloBuilder& b, const Value& x, int64_t dim, const std::string& combiner, double init);

}  // namespace torch_tpu
