// Pieces shared by the rule files of torch.special's remaining functions (special_more.cpp, special_more2.cpp).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "lowering/op_context.h"

namespace torch_tpu {

// Horner's scheme from 0 over `c` (highest power first) at z, as Cephes' polevl loops write it.
Value horner(HloBuilder& b, const Value& z, const std::vector<double>& c);
// Cephes' chbevl: the Chebyshev series `c` (highest order first) at y, 0.5 (b0 - b2).
Value clenshaw(HloBuilder& b, const Value& y, const std::vector<double>& c);

// One step of masked_while: from the iteration number (0-based, s64 scalar), the state and the running mask, the
// next state and where another step is needed afterwards.
using MaskedStep = std::function<std::pair<std::vector<Value>, Value>(
    HloBuilder&, const Value& iteration, const std::vector<Value>& state, const Value& running)>;
// A stablehlo.while over elementwise state (all of `running`'s shape): elements step while their mask holds and keep
// their values once it clears; the loop ends when no element runs. Returns the final state.
std::vector<Value> masked_while(HloBuilder& b, const std::vector<Value>& state, const Value& running,
                                const MaskedStep& step);

// PyTorch's CPU kernels for these ops exist for float32/float64 only (integer inputs promote to float32).
void require_f32_f64(OpContext& c, const char* name);

void add_polynomial_rules(std::vector<LoweringRow>& rows);  // special_more.cpp
void add_bessel_rules(std::vector<LoweringRow>& rows);      // special_more.cpp
void add_igamma_rules(std::vector<LoweringRow>& rows);        // special_igamma.cpp
void add_special_more2_rules(std::vector<LoweringRow>& rows);  // special_more2.cpp: erfcx, log_ndtr, ndtri, zeta

}  // namespace torch_tpu
