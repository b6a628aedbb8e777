// Pieces of max pooling that conv.cpp (max_pool) and pooling.cpp (adaptive max pool, unpooling) share.
#pragma once

#include <string>
#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {

// Flat position of each element of `dims` within its plane of the last `nd` dims (h*W + w), as PyTorch's max
// pooling indices count.
Value spatial_positions(HloBuilder& b, const std::vector<int64_t>& dims, size_t nd);
// The combiner of a variadic reduce over (value of dtype t, s64 position) pairs picking PyTorch's max.
std::string max_with_index_region(HloBuilder& b, ElementType t);
// Max pooling's backward: g's elements added at the plane positions `indices` into zeros shaped `x_dims`.
Value scatter_plane_grads(HloBuilder& b, const Value& g, const Value& indices, const std::vector<int64_t>& x_dims,
                          size_t nd);

}  // namespace torch_tpu
