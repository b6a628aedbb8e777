// Fused optimizer steps (_fused_adam_, _fused_adamw_, _fused_sgd_): every parameter of the call in one program.
// Hyper-parameters are one runtime vector, so learning-rate schedules and step counts never recompile; state_steps
// stay on the device. Reduced-precision parameters update in float32 and round once (PyTorch's opmath).
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;

struct Math {
  HloBuilder& b;
  ElementType t;
  std::vector<int64_t> dims;
  Value k(double v) const { return b.constant(v, t, dims); }
  Value add(const Value& x, const Value& y) const { return b.binary("stablehlo.add", x, y); }
  Value sub(const Value& x, const Value& y) const { return b.binary("stablehlo.subtract", x, y); }
  Value mul(const Value& x, const Value& y) const { return b.binary("stablehlo.multiply", x, y); }
  Value div(const Value& x, const Value& y) const { return b.binary("stablehlo.divide", x, y); }
  Value at(const Value& scalar) const { return b.broadcast_to(b.convert(scalar, t), dims); }
};

ElementType opmath(ElementType t) { return t == ElementType::kBF16 || t == ElementType::kF16 ? ElementType::kF32 : t; }

// One hyper-parameter out of the runtime vector.
Value hyper(HloBuilder& b, const Value& all, int64_t i) { return b.reshape(b.slice(all, {i}, {i + 1}), {}); }

// Gradient after unscaling (grad_scale) and maximize; the unscaled gradient is also written back, as CUDA does.
Value prepared_grad(OpContext& c, const Math& m, const Value& grad, size_t scale_arg, bool maximize) {
  Value g = m.b.convert(grad, m.t);
  if (c.has(scale_arg)) g = m.div(g, m.at(c.tensor(scale_arg)));
  if (maximize) g = m.b.unary("stablehlo.negate", g);
  return g;
}

// found_inf != 0 skips the whole step: every state keeps its value.
Value unless_inf(OpContext& c, const Math& m, size_t inf_arg, const Value& updated, const Value& old) {
  if (!c.has(inf_arg)) return updated;
  Value inf = m.b.convert(c.tensor(inf_arg), ElementType::kF32);
  Value skip = m.b.compare(CompareDirection::kNe, inf, m.b.constant(0, ElementType::kF32));
  return m.b.select(m.b.broadcast_to(skip, m.dims), old, updated);
}

// _fused_adam(w)_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
//                 weight_decay, eps, amsgrad, maximize, grad_scale?, found_inf?)
LoweringRule adam_rule(bool decoupled) {
  return [decoupled](OpContext& c) -> V {
    HloBuilder& b = c.b;
    V params = c.tensor_list(0), grads = c.tensor_list(1), avgs = c.tensor_list(2), sqs = c.tensor_list(3);
    V maxs = c.tensor_list(4), steps = c.tensor_list(5);
    bool amsgrad = c.flag(11), maximize = c.flag(12);
    Value hp = c.runtime_vector({c.arg(6).toScalar(), c.arg(7).toScalar(), c.arg(8).toScalar(), c.arg(9).toScalar(),
                                 c.arg(10).toScalar()},
                                ElementType::kF64);
    size_t n = params.size();
    V new_p, new_g, new_m, new_v, new_max;
    for (size_t i = 0; i < n; ++i) {
      Math m{b, opmath(params[i].type.dtype), params[i].type.dims};
      Value lr = m.at(hyper(b, hp, 0)), beta1 = m.at(hyper(b, hp, 1)), beta2 = m.at(hyper(b, hp, 2));
      Value wd = m.at(hyper(b, hp, 3)), eps = m.at(hyper(b, hp, 4));
      Value p0 = b.convert(params[i], m.t), m0 = b.convert(avgs[i], m.t), v0 = b.convert(sqs[i], m.t);
      Value g = prepared_grad(c, m, grads[i], 13, maximize);
      Value p = p0;
      if (decoupled) {
        p = m.mul(p, m.sub(m.k(1), m.mul(lr, wd)));
      } else {
        g = m.add(g, m.mul(wd, p));
      }
      Value avg = m.add(m.mul(beta1, m0), m.mul(m.sub(m.k(1), beta1), g));
      Value sq = m.add(m.mul(beta2, v0), m.mul(m.sub(m.k(1), beta2), m.mul(g, g)));
      Value step = m.at(steps[i]);
      Value bc1 = m.sub(m.k(1), b.binary("stablehlo.power", beta1, step));
      Value bc2 = m.sub(m.k(1), b.binary("stablehlo.power", beta2, step));
      Value second = sq;
      if (amsgrad) {
        second = b.binary("stablehlo.maximum", b.convert(maxs[i], m.t), sq);
        new_max.push_back(unless_inf(c, m, 14, second, b.convert(maxs[i], m.t)));
      }
      Value denom = m.add(m.div(b.unary("stablehlo.sqrt", second), b.unary("stablehlo.sqrt", bc2)), eps);
      p = m.sub(p, m.mul(m.div(lr, bc1), m.div(avg, denom)));
      new_p.push_back(unless_inf(c, m, 14, p, p0));
      new_g.push_back(c.has(13) ? unless_inf(c, m, 14, g, b.convert(grads[i], m.t)) : grads[i]);
      new_m.push_back(unless_inf(c, m, 14, avg, m0));
      new_v.push_back(unless_inf(c, m, 14, sq, v0));
    }
    // Results in the order of the written lists: self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs.
    V out;
    for (const V* list : {&new_p, &new_g, &new_m, &new_v, &new_max}) out.insert(out.end(), list->begin(), list->end());
    if (!amsgrad) out.insert(out.end(), maxs.begin(), maxs.end());  // passed but unused: unchanged
    return out;
  };
}

// _fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize,
//             is_first_step, grad_scale?, found_inf?)
V sgd_rule(OpContext& c) {
  HloBuilder& b = c.b;
  V params = c.tensor_list(0), grads = c.tensor_list(1), bufs = c.tensor_list(2);
  double momentum_value = c.scalar(4);
  bool nesterov = c.flag(7), maximize = c.flag(8), first = c.flag(9);
  Value hp = c.runtime_vector({c.arg(3).toScalar(), c.arg(4).toScalar(), c.arg(5).toScalar(), c.arg(6).toScalar()},
                              ElementType::kF64);
  V new_p, new_g, new_buf;
  for (size_t i = 0; i < params.size(); ++i) {
    Math m{b, opmath(params[i].type.dtype), params[i].type.dims};
    Value wd = m.at(hyper(b, hp, 0)), mom = m.at(hyper(b, hp, 1)), lr = m.at(hyper(b, hp, 2));
    Value damp = m.at(hyper(b, hp, 3));
    Value p0 = b.convert(params[i], m.t);
    Value g = prepared_grad(c, m, grads[i], 10, maximize);
    new_g.push_back(c.has(10) ? unless_inf(c, m, 11, g, b.convert(grads[i], m.t)) : grads[i]);
    g = m.add(g, m.mul(wd, p0));
    if (momentum_value != 0 && i < bufs.size()) {
      Value buf0 = b.convert(bufs[i], m.t);
      Value buf = first ? g : m.add(m.mul(mom, buf0), m.mul(m.sub(m.k(1), damp), g));
      new_buf.push_back(unless_inf(c, m, 11, buf, buf0));
      g = nesterov ? m.add(g, m.mul(mom, buf)) : buf;
    } else if (i < bufs.size()) {
      new_buf.push_back(bufs[i]);
    }
    new_p.push_back(unless_inf(c, m, 11, m.sub(p0, m.mul(lr, g)), p0));
  }
  V out;
  for (const V* list : {&new_p, &new_g, &new_buf}) out.insert(out.end(), list->begin(), list->end());
  return out;
}

}  // namespace

void add_fused_optimizer_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"_fused_adam_"}, adam_rule(false)});
  rows.push_back({{"_fused_adamw_"}, adam_rule(true)});
  rows.push_back({{"_fused_sgd_"}, sgd_rule});
}

}  // namespace torch_tpu
