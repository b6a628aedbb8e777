// The fused RNN cells PyTorch picks for PrivateUse1 devices (LSTMCell/GRUCell and so nn.LSTM/nn.GRU, packed or
// not, call them; core has CUDA kernels only), forward and backward, each one program:
//   _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
//       gates = input_gates + hidden_gates (+ biases), chunks i, f, g, o along the last dim;
//       cy = sigmoid(f) * cx + sigmoid(i) * tanh(g), hy = sigmoid(o) * tanh(cy);
//       workspace = the activated gates [sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)] (as CUDA keeps them).
//   _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias) -> (dgates, dcx, dbias?)
//   _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
//       chunks r, z, n of both gate tensors; r = sigmoid(ir + hr), z = sigmoid(iz + hz), n = tanh(in + r * hn),
//       hy = n + z * (hx - n); workspace = [r, z, n, hx, hn] (5 chunks, as CUDA keeps them).
//   _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) -> (dinput_gates, dhidden_gates, dhx, dbi?, dbh?)
// Autograd comes from core (derivatives.yaml routes the cells' backward to the ops above). float16/bfloat16 gates
// compute in float32 and round once per result. The GRU ops have no meta kernel in core; the ones below give the
// output shapes (the workspace is this backend's own layout, read only by the backward above).
#include <ATen/core/Tensor.h>

#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;

struct Gates {
  HloBuilder& b;
  ElementType t;  // compute type
  Value conv(const Value& v) const { return b.convert(v, t); }
  Value add(const Value& x, const Value& y) const { return b.binary("stablehlo.add", x, y); }
  Value sub(const Value& x, const Value& y) const { return b.binary("stablehlo.subtract", x, y); }
  Value mul(const Value& x, const Value& y) const { return b.binary("stablehlo.multiply", x, y); }
  Value one(const Value& like) const { return b.constant(1, t, like.type.dims); }
  Value sigmoid(const Value& x) const { return b.unary("stablehlo.logistic", x); }
  Value tanh(const Value& x) const { return b.unary("stablehlo.tanh", x); }
  // d sigmoid / dx from the activated value s: s * (1 - s).
  Value dsigmoid(const Value& s) const { return mul(s, sub(one(s), s)); }
  // d tanh / dx from the activated value y: 1 - y^2.
  Value dtanh(const Value& y) const { return sub(one(y), mul(y, y)); }
  // Chunk k of n along the last dim.
  Value chunk(const Value& v, int64_t k, int64_t n) const {
    std::vector<int64_t> start(v.type.dims.size(), 0), limit = v.type.dims;
    int64_t last = v.type.rank() - 1, width = v.type.dims[last] / n;
    start[last] = k * width;
    limit[last] = (k + 1) * width;
    return b.slice(v, start, limit);
  }
  Value cat(const V& parts) const { return b.concatenate(parts, parts.at(0).type.rank() - 1); }
  // A 1-D bias [n*H] broadcast against gates [..., n*H].
  Value bias(const Value& v, const std::vector<int64_t>& dims) const { return b.broadcast_to(conv(v), dims); }
  Value sum_batch(const Value& v) const {  // over every dim but the last
    std::vector<int64_t> dims;
    for (int64_t d = 0; d + 1 < v.type.rank(); ++d) dims.push_back(d);
    return dims.empty() ? v : reduce_sum(b, v, dims);
  }
};

Value summed_gates(OpContext& c, const Gates& g) {
  Value gates = g.add(g.conv(c.tensor(0)), g.conv(c.tensor(1)));
  if (c.has(3)) gates = g.add(gates, g.bias(c.tensor(3), gates.type.dims));
  if (c.has(4)) gates = g.add(gates, g.bias(c.tensor(4), gates.type.dims));
  return gates;
}

V lstm_cell(OpContext& c) {
  Gates g{c.b, opmath_type(c.out(0).dtype)};
  Value gates = summed_gates(c, g);
  Value i = g.sigmoid(g.chunk(gates, 0, 4)), f = g.sigmoid(g.chunk(gates, 1, 4));
  Value cand = g.tanh(g.chunk(gates, 2, 4)), o = g.sigmoid(g.chunk(gates, 3, 4));
  Value cy = g.add(g.mul(f, g.conv(c.tensor(2))), g.mul(i, cand));
  Value hy = g.mul(o, g.tanh(cy));
  return {c.b.convert(hy, c.out(0).dtype), c.b.convert(cy, c.out(1).dtype),
          c.b.convert(g.cat({i, f, cand, o}), c.out(2).dtype)};
}

V lstm_cell_backward(OpContext& c) {  // (grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
  HloBuilder& b = c.b;
  if (!c.out_defined(0)) {  // no incoming gradient at all: PyTorch returns three Nones
    Value none = b.constant(0, ElementType::kF32);
    return {none, none, none};
  }
  Gates g{b, opmath_type(c.out(0).dtype)};
  Value cx = g.conv(c.tensor(2)), cy = g.conv(c.tensor(3)), ws = g.conv(c.tensor(4));
  Value i = g.chunk(ws, 0, 4), f = g.chunk(ws, 1, 4), cand = g.chunk(ws, 2, 4), o = g.chunk(ws, 3, 4);
  Value zero = b.constant(0, g.t, cx.type.dims);
  Value ghy = c.has(0) ? g.conv(c.tensor(0)) : zero;
  Value gcy_in = c.has(1) ? g.conv(c.tensor(1)) : zero;
  Value tcy = g.tanh(cy);
  Value gcy = g.add(gcy_in, g.mul(g.mul(ghy, o), g.dtanh(tcy)));
  Value gi = g.mul(g.mul(gcy, cand), g.dsigmoid(i));
  Value gf = g.mul(g.mul(gcy, cx), g.dsigmoid(f));
  Value gg = g.mul(g.mul(gcy, i), g.dtanh(cand));
  Value go = g.mul(g.mul(ghy, tcy), g.dsigmoid(o));
  Value dgates = g.cat({gi, gf, gg, go});
  V out{b.convert(dgates, c.out(0).dtype), b.convert(g.mul(gcy, f), c.out(1).dtype)};
  out.push_back(c.out_defined(2) ? b.convert(g.sum_batch(dgates), c.out(2).dtype) : out[0]);
  return out;
}

V gru_cell(OpContext& c) {
  Gates g{c.b, opmath_type(c.out(0).dtype)};
  Value ig = g.conv(c.tensor(0)), hg = g.conv(c.tensor(1)), hx = g.conv(c.tensor(2));
  if (c.has(3)) ig = g.add(ig, g.bias(c.tensor(3), ig.type.dims));
  if (c.has(4)) hg = g.add(hg, g.bias(c.tensor(4), hg.type.dims));
  Value r = g.sigmoid(g.add(g.chunk(ig, 0, 3), g.chunk(hg, 0, 3)));
  Value z = g.sigmoid(g.add(g.chunk(ig, 1, 3), g.chunk(hg, 1, 3)));
  Value hn = g.chunk(hg, 2, 3);
  Value n = g.tanh(g.add(g.chunk(ig, 2, 3), g.mul(r, hn)));
  Value hy = g.add(n, g.mul(z, g.sub(hx, n)));
  return {c.b.convert(hy, c.out(0).dtype), c.b.convert(g.cat({r, z, n, hx, hn}), c.out(1).dtype)};
}

V gru_cell_backward(OpContext& c) {  // (grad_hy, workspace, has_bias)
  HloBuilder& b = c.b;
  Gates g{b, opmath_type(c.out(0).dtype)};
  Value go = g.conv(c.tensor(0)), ws = g.conv(c.tensor(1));
  Value r = g.chunk(ws, 0, 5), z = g.chunk(ws, 1, 5), n = g.chunk(ws, 2, 5), hx = g.chunk(ws, 3, 5);
  Value hn = g.chunk(ws, 4, 5);
  Value gz = g.mul(g.mul(go, g.sub(hx, n)), g.dsigmoid(z));
  Value ghx = g.mul(go, z);
  Value gn = g.mul(g.mul(go, g.sub(g.one(z), z)), g.dtanh(n));
  Value ghn = g.mul(gn, r);
  Value gr = g.mul(g.mul(gn, hn), g.dsigmoid(r));
  Value d_input = g.cat({gr, gz, gn}), d_hidden = g.cat({gr, gz, ghn});
  V out{b.convert(d_input, c.out(0).dtype), b.convert(d_hidden, c.out(1).dtype), b.convert(ghx, c.out(2).dtype)};
  out.push_back(c.out_defined(3) ? b.convert(g.sum_batch(d_input), c.out(3).dtype) : out[0]);
  out.push_back(c.out_defined(4) ? b.convert(g.sum_batch(d_hidden), c.out(4).dtype) : out[0]);
  return out;
}

}  // namespace

void add_rnn_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"_thnn_fused_lstm_cell"}, lstm_cell});
  rows.push_back({{"_thnn_fused_lstm_cell_backward_impl"}, lstm_cell_backward});
  rows.push_back({{"_thnn_fused_gru_cell"}, gru_cell});
  rows.push_back({{"_thnn_fused_gru_cell_backward"}, gru_cell_backward});
}

}  // namespace torch_tpu
