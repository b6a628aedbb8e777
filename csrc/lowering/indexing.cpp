// Indexing and joining: cat, index_select, gather, embedding backward (filled in by the indexing rules work).
#include "lowering/op_context.h"

namespace torch_tpu {

void add_indexing_rules(std::vector<LoweringRow>& rows) {}

}  // namespace torch_tpu
