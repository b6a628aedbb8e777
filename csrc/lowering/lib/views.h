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
  bool operator==(const ViewSpec& o) const { return sizes == o.sizes && strides == o.strides && offset == o.offset; }
};

// The elements of `storage` (1-D) that `view` selects, shaped `view.sizes`. Dense (possibly permuted, stepped or
// broadcast) views and views that are a sub-box of the reshaped storage (heads split off a fused projection) become
// slice/reshape/transpose/broadcast; any other as_strided view becomes a gather.
Value read_view(HloBuilder& b, const Value& storage, const ViewSpec& view);

// A new 1-D storage: `storage` with the elements `view` selects replaced by `update` (shaped view.sizes).
Value write_view(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& view);

// The same new storage as write_view, built so that no in-place update of `storage` can read an element after it was
// overwritten: the update is placed into a fresh storage-sized value (pad or scatter into zeros) and chosen per element
// by a mask, so `storage` is only read elementwise at the end. For updates computed from other elements of `storage`
// (x[0] = x[0].flip(0)): XLA may run a dynamic_update_slice in place while its update still reads the operand.
Value write_view_apart(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& view);

// Reinterprets the bytes of a 1-D `raw` value as `numel` elements of `dtype` (bitcast; bool via 0/1 bytes).
Value reinterpret_storage(HloBuilder& b, const Value& raw, ElementType dtype, int64_t numel);

}  // namespace torch_tpu
