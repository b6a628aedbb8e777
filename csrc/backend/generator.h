// Per-device random generators. Values are drawn on the host by a CPU engine that the tpu generator owns, then
// copied to the device: seeded alike, tpu and CPU draw the same numbers, and get/set_rng_state round-trip exactly.
#pragma once

#include <ATen/core/Generator.h>

namespace torch_tpu {

class TpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The CPU generator that actually draws the numbers.
  const at::Generator& host() const { return host_; }

 private:
  TpuGenerator* clone_impl() const override;
  at::Generator host_;
};

const at::Generator& default_tpu_generator(c10::DeviceIndex device);
// The host generator to use for an op on `device` given the op's optional generator argument.
at::Generator host_generator_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace torch_tpu
