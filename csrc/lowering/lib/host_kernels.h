// Host kernels (opt-in: TORCH_TPU_HOST_KERNELS=1): on the XLA-CPU plugin the backend registers torch's own CPU
// kernels as XLA FFI custom-call targets (backend/host_kernels.cpp) and rules call them instead of XLA's ops for
// float32/float64 matrix products ("torch_tpu.gemm_{n,t}{n,t}": mm, addmm, bmm, baddbmm, attention) and plain
// convolutions with their gradients ("torch_tpu.conv", "torch_tpu.conv_input_grad", "torch_tpu.conv_weight_grad").
// Switched before programs are lowered: graphs already recorded keep the lowering they were built with.
#pragma once

#include "hlo/builder.h"

namespace torch_tpu {

void set_host_kernels(bool on);
bool host_kernels();
bool host_kernels_registered();  // the plugin accepted every target (backend/host_kernels.cpp)

// A host kernel call costs tens of microseconds more than an XLA kernel (the custom call, ATen's dispatch, an
// OpenMP team started from an XLA thread): products and convolutions smaller than this many multiply-adds stay
// XLA's. At 2^25 the GPT-2-style model's linear layers are host GEMMs, its 64x64 attention products and the char
// transformer's d=64 layers are not (both ran slower as host calls).
constexpr int64_t kHostKernelMinMacs = int64_t{1} << 25;
// The size limit in force (tests lower it to reach the host kernels with small shapes); returns the previous one.
int64_t set_host_kernel_min_macs(int64_t macs);
int64_t host_kernel_min_macs();
// Whether an op in element type `t` of `macs` multiply-adds calls its host kernel (defined in linalg.cpp).
bool host_kernel_fits(ElementType t, int64_t macs);
// op(x) @ op(y) over the last two dims, the leading (batch) dims equal in both; op transposes when asked. An operand
// that is a transpose of its last two dims is read in place (its transpose is left dead). Defined in linalg.cpp.
Value host_matmul(HloBuilder& b, Value x, Value y, bool transpose_x, bool transpose_y);

}  // namespace torch_tpu
