// Neural-network ops: softmax family, losses, layer norm, dropout backward (filled in by the nn rules work).
#include "lowering/op_context.h"

namespace torch_tpu {

void add_nn_rules(std::vector<LoweringRow>& rows) {}

}  // namespace torch_tpu
