// Convolutions and pooling (filled in by the conv rules work).
#include "lowering/op_context.h"

namespace torch_tpu {

void add_conv_rules(std::vector<LoweringRow>& rows) {}

}  // namespace torch_tpu
