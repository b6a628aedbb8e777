#include "lowering/table.h"

#include <unordered_map>

#include "lowering/lib/common_dtype.h"

namespace torch_tpu {

const std::vector<LoweringRow>& lowering_table() {
  static const std::vector<LoweringRow> table = [] {
    Rows rows;
    add_activation_rules(rows);
    add_math_rules(rows);
    add_special_rules(rows);
    add_elementwise_rules(rows);
    add_scan_rules(rows);
    add_reduction_rules(rows);
    add_linalg_rules(rows);
    add_linalg_decomp_rules(rows);
    add_linalg_solver_rules(rows);
    add_linalg_jacobi_rules(rows);
    add_fft_rules(rows);
    add_nn_rules(rows);
    add_distance_rules(rows);
    add_margin_loss_rules(rows);
    add_indexing_rules(rows);
    add_shape_rules(rows);
    add_conv_rules(rows);
    add_batch_norm_rules(rows);
    add_amp_rules(rows);
    add_rnn_rules(rows);
    add_spatial_rules(rows);
    add_upsample_aa_rules(rows);
    add_pooling_rules(rows);
    add_grid_sample_rules(rows);
    add_embedding_bag_rules(rows);
    add_segment_reduce_rules(rows);
    add_selection_rules(rows);
    add_small_op_rules(rows);
    add_flat_index_rules(rows);
    add_polynomial_rules(rows);
    add_bessel_rules(rows);
    add_erfcx_ndtri_zeta_rules(rows);
    add_igamma_rules(rows);
    compute_in_common_dtype(rows);  // wraps the rows that promote (LoweringRow::promotes)
    add_foreach_rules(rows);        // after the elementwise rows: foreach rules look them up
    add_fused_optimizer_rules(rows);
    return rows;
  }();
  return table;
}

const LoweringRow* find_row(const std::string& name) {
  static const std::unordered_map<std::string, const LoweringRow*> index = [] {
    std::unordered_map<std::string, const LoweringRow*> m;
    for (const auto& row : lowering_table()) {
      for (const auto& n : row.names) m.emplace("aten::" + n, &row);  // the first row listing a name serves it
    }
    return m;
  }();
  std::string key = name.rfind("aten::", 0) == 0 ? name : "aten::" + name;
  auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

}  // namespace torch_tpu
