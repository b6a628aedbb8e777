// torch.equal returns a Python bool: the comparison and its reduction run on the device as lowered ops (eq, all),
// and only the one resulting value is read back to the host.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

bool tpu_equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, but found at least two "
              "devices, ", self.device(), " and ", other.device(), "!");
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("equal", TORCH_FN(tpu_equal)); }

}  // namespace torch_tpu
