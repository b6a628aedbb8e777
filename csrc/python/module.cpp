#include "python/module.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native core: PJRT runtime, StableHLO builder and the PyTorch device glue";
  torch_tpu::bind_errors(m);
  torch_tpu::bind_runtime(m);
  torch_tpu::bind_hlo(m);
  torch_tpu::bind_backend(m);
  torch_tpu::bind_replay(m);
  torch_tpu::bind_contract(m);
  torch_tpu::bind_distributed(m);
}
