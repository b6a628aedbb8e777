// The lowering table: every row of every family, assembled in one place (table.cpp). A family's file defines its
// add_*_rules function and nothing else registers rows; backend/registry.cpp derives the in-place and out= overloads
// and registers them with the dispatcher.
#pragma once

#include <string>
#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {

using Rows = std::vector<LoweringRow>;

// The whole table, in the order the families are listed in table.cpp (a name two rows list: the first row serves it).
const std::vector<LoweringRow>& lowering_table();
// nullptr when no row lowers `name` ("aten::add.Tensor" or "add.Tensor").
const LoweringRow* find_row(const std::string& name);

// The families, one function each, by folder.
void add_elementwise_rules(Rows& rows);        // elementwise/elementwise.cpp
void add_activation_rules(Rows& rows);         // elementwise/activations.cpp
void add_math_rules(Rows& rows);               // elementwise/pointwise_math.cpp
void add_amp_rules(Rows& rows);                // elementwise/amp.cpp
void add_special_rules(Rows& rows);            // special/gamma_erf_bessel_i.cpp
void add_polynomial_rules(Rows& rows);         // special/bessel_airy_polynomials.cpp
void add_bessel_rules(Rows& rows);             // special/bessel_airy_polynomials.cpp
void add_erfcx_ndtri_zeta_rules(Rows& rows);      // special/erfcx_ndtri_zeta.cpp
void add_igamma_rules(Rows& rows);             // special/igamma.cpp
void add_reduction_rules(Rows& rows);          // reduce/reductions.cpp
void add_scan_rules(Rows& rows);               // reduce/scans.cpp
void add_segment_reduce_rules(Rows& rows);     // reduce/segment_reduce.cpp
void add_selection_rules(Rows& rows);          // reduce/order_statistics.cpp
void add_small_op_rules(Rows& rows);           // reduce/small_ops.cpp
void add_indexing_rules(Rows& rows);           // index/indexing.cpp
void add_flat_index_rules(Rows& rows);         // index/flat_index.cpp
void add_shape_rules(Rows& rows);              // index/shape_ops.cpp
void add_embedding_bag_rules(Rows& rows);      // index/embedding_bag.cpp
void add_nn_rules(Rows& rows);                 // nn/nn.cpp
void add_distance_rules(Rows& rows);           // nn/distances.cpp
void add_margin_loss_rules(Rows& rows);        // nn/margin_losses.cpp
void add_batch_norm_rules(Rows& rows);         // nn/batch_norm.cpp
void add_rnn_rules(Rows& rows);                // nn/rnn.cpp
void add_conv_rules(Rows& rows);               // conv/conv.cpp
void add_pooling_rules(Rows& rows);            // conv/pooling.cpp
void add_spatial_rules(Rows& rows);            // conv/spatial.cpp
void add_upsample_aa_rules(Rows& rows);        // conv/upsample_aa.cpp
void add_grid_sample_rules(Rows& rows);        // conv/grid_sample.cpp
void add_linalg_rules(Rows& rows);             // linalg/products.cpp
void add_linalg_decomp_rules(Rows& rows);      // linalg/lu.cpp
void add_linalg_solver_rules(Rows& rows);      // linalg/cholesky_triangular.cpp
void add_linalg_jacobi_rules(Rows& rows);      // linalg/jacobi.cpp
void add_fft_rules(Rows& rows);                // fft/fft.cpp
void add_foreach_rules(Rows& rows);            // optim/foreach.cpp
void add_fused_optimizer_rules(Rows& rows);    // optim/fused_optimizers.cpp

}  // namespace torch_tpu
