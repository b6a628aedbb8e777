// The backend's view of the runtime: which PJRT client and compile cache serve the `tpu` device, and which PJRT
// devices the torch device indices map to. Set once from Python at import (torch_tpu starts the runtime there), so
// nothing on the dispatch path ever needs the GIL.
#pragma once

#include <memory>
#include <vector>

#include "runtime/client.h"
#include "runtime/compile_cache.h"

namespace torch_tpu {

struct BackendState {
  std::shared_ptr<Client> client;
  std::shared_ptr<CompileCache> cache;
  std::vector<int> pjrt_index;  // torch device index -> index among the client's addressable devices
  std::vector<int64_t> capacity;  // bytes per device: the plugin's limit, else physical host memory (XLA-CPU)
};

void set_backend_state(std::shared_ptr<Client> client, std::shared_ptr<CompileCache> cache,
                       std::vector<int> pjrt_index);
// Number of tpu devices; 0 while no runtime is set (the device is then unavailable).
int device_count() noexcept;
// The state; throws Error(FAILED_PRECONDITION) naming the cause when the device is unavailable.
const BackendState& backend_state();
PJRT_Device* pjrt_device(int index);
void check_device_index(int index);

int current_device() noexcept;
void set_current_device(int index);

// The precision of matrix products (dot_general, convolution) in the programs built from now on: TorchTPU's
// torch.tpu.precision() when one is in effect, else PyTorch's float32 matmul precision (highest, high, medium map
// to HIGHEST, HIGH, DEFAULT). On a TPU, DEFAULT multiplies float32 operands in one bfloat16 pass.
enum class DotPrecision : int8_t { kDefault = 0, kHigh = 1, kHighest = 2 };
DotPrecision current_dot_precision();
// -1 clears TorchTPU's override (PyTorch's setting applies again).
void set_dot_precision_override(int precision);
int dot_precision_override();
const char* dot_precision_name(DotPrecision p);

}  // namespace torch_tpu
