// Ops that run on the host by design, not as a fallback (random draws from the tpu generator's host engine, ops
// whose result shape depends on the data): registered for the tpu key by register_host_ops, counted per op.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu {

std::map<std::string, int64_t> host_op_counts();
void clear_host_op_counts();

}  // namespace torch_tpu
