// Pieces the torch.special rule files share: Cephes' polynomial and Chebyshev evaluators and its modified Bessel I0/I1
// tables (cephes.cpp), the masked while loop, the dtype check.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {

// Horner's scheme from 0 over `c` (highest power first) at z, as Cephes' polevl loops write it.
Value horner(HloBuilder& b, const Value& z, const std::vector<double>& c);
// Cephes' chbevl: the Chebyshev series `c` (highest order first) at y, 0.5 (b0 - b2).
Value clenshaw(HloBuilder& b, const Value& y, const std::vector<double>& c);
// Cephes' Chebyshev coefficients of exp(-x) I0(x) and exp(-x) I1(x): on [0, 8] in x / 2 - 2 (Small) and on (8, inf)
// in 32 / x - 2 (Large, times sqrt(x)).
extern const std::vector<double> kCephesI0Small, kCephesI0Large, kCephesI1Small, kCephesI1Large;

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


}  // namespace torch_tpu
