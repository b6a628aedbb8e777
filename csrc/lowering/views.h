// Storage <-> view programs (no torch): a tensor is a (sizes, strides, offset) view over a 1-D storage value.
#pragma once

#include <cstdint>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu {

struct ViewSpec {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  int64_t numel() const;
};

// The elements of `storage` (1-D) that `view` selects, shaped `view.sizes`. Dense (possibly permuted, stepped or
// broadcast) views and views that are a sub-box of the reshaped storage (heads split off a fused projection) become
// slice/reshape/transpose/broadcast; any other as_strided view becomes a gather.
Value read_view(HloBuilder& b, const Value& storage, const ViewSpec& view);

// A new 1-D storage: `storage` with the elements `view` selects replaced by `update` (shaped view.sizes).
Value write_view(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& view);

// Reinterprets the bytes of a 1-D `raw` value as `numel` elements of `dtype` (bitcast; bool via 0/1 bytes).
Value reinterpret_storage(HloBuilder& b, const Value& raw, ElementType dtype, int64_t numel);

}  // namespace torch_tpu
