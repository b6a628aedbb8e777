// A compiled, loaded program. Executes on one device; outputs are fresh buffers, one per program result.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pjrt_c_api.h"
#include "runtime/buffer.h"
#include "runtime/event.h"

namespace torch_tpu {

struct ExecuteResult {
  std::vector<std::shared_ptr<Buffer>> outputs;
  Event done;  // fires when the execution finishes; carries its error
};

class Executable {
 public:
  Executable(const PJRT_Api* api, PJRT_LoadedExecutable* executable);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  ~Executable();

  size_t num_outputs() const { return num_outputs_; }

  // Runs on `device` (an addressable PJRT device; the program must be compiled portable). Arguments aliased to
  // outputs (tf.aliasing_output) are donated, i.e. deleted, unless listed in `non_donatable`.
  ExecuteResult execute(const std::vector<Buffer*>& args, PJRT_Device* device,
                        const std::vector<int64_t>& non_donatable = {}) const;

  // Bytes that Client::deserialize turns back into this executable (same plugin build only).
  std::string serialize() const;

  // A short name for profiles and traces (set once by the compile cache, before the executable is shared).
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  void trace_completion(PJRT_Event* done, PJRT_Device* device, int64_t start_ns) const;

  std::string label_ = "tpu_program";
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* executable_;
  size_t num_outputs_ = 0;
};

}  // namespace torch_tpu
