#include "backend/prep.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <unordered_map>

namespace torch_tpu {
namespace {

// Prepares the Tensor?[] of index / index_put (argument 1): CPU index tensors move to the op's device (as CUDA's
// kernels allow), and with `expand_masks` (index) bool masks become long indices (nonzero: a host sync, as on
// CUDA), since no meta kernel can shape that result. index_put keeps its masks: its rule applies them without a sync.
HostPrep index_list_prep(bool expand_masks) {
  return [expand_masks](std::vector<c10::IValue>& args) {
    const c10::Device device = args.at(0).toTensor().device();
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : args.at(1).toListRef()) {
      if (!e.isTensor() || !e.toTensor().defined()) {
        out.push_back(std::nullopt);
        continue;
      }
      at::Tensor t = e.toTensor().to(device);
      bool mask = t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
      if (expand_masks && mask && t.dim() > 0) {
        at::Tensor nz = t.nonzero();
        for (int64_t j = 0; j < nz.size(1); ++j) out.push_back(nz.select(1, j));
      } else {
        out.push_back(t);
      }
    }
    args.at(1) = out;
  };
}

// PyTorch's meta kernel for _thnn_fused_lstm_cell reads .device of both biases, so a bias-free cell (bias=False)
// would fail there: absent biases become zeros of the gates' type (adding them changes nothing).
void lstm_zero_biases(std::vector<c10::IValue>& args) {
  const at::Tensor& gates = args.at(0).toTensor();
  for (size_t i : {size_t{3}, size_t{4}}) {
    bool absent = args.at(i).isNone() || (args[i].isTensor() && !args[i].toTensor().defined());
    if (absent) args[i] = at::zeros({gates.size(-1)}, gates.options());
  }
}

// Meta kernels for the GRU ops (core has none), with the checks PyTorch's LSTM meta makes.
void check_gates(const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
                 const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2, "_thnn_fused_gru_cell: input_gates must be 2-D, got ", input_gates.dim(), "-D");
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "_thnn_fused_gru_cell: input_gates ",
              input_gates.sizes(), " and hidden_gates ", hidden_gates.sizes(), " must have the same size");
  TORCH_CHECK(hx.dim() == 2 && hx.size(0) == input_gates.size(0) && hx.size(1) * 3 == input_gates.size(1),
              "_thnn_fused_gru_cell: hx ", hx.sizes(), " does not match gates ", input_gates.sizes());
  for (const auto& bias : {input_bias, hidden_bias}) {
    if (bias && bias->defined()) {
      TORCH_CHECK(bias->dim() == 1 && bias->size(0) == input_gates.size(1), "_thnn_fused_gru_cell: bias ",
                  bias->sizes(), " does not match gates ", input_gates.sizes());
    }
  }
}

std::tuple<at::Tensor, at::Tensor> gru_cell_meta(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                 const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                 const std::optional<at::Tensor>& hidden_bias) {
  check_gates(input_gates, hidden_gates, hx, input_bias, hidden_bias);
  at::Tensor workspace = at::empty({hx.size(0), hx.size(1) * 5}, input_gates.options());
  return {at::empty_like(hx, at::MemoryFormat::Contiguous), workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward_meta(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  TORCH_CHECK(workspace.dim() == 2 && grad_hy.dim() == 2 && workspace.size(1) == grad_hy.size(1) * 5 &&
                  workspace.size(0) == grad_hy.size(0),
              "_thnn_fused_gru_cell_backward: workspace ", workspace.sizes(), " does not match grad_hy ",
              grad_hy.sizes());
  int64_t n = grad_hy.size(0), h = grad_hy.size(1);
  at::Tensor gi = at::empty({n, 3 * h}, workspace.options()), gh = at::empty({n, 3 * h}, workspace.options());
  at::Tensor ghx = at::empty({n, h}, workspace.options());
  at::Tensor bi, bh;
  if (has_bias) {
    bi = at::empty({3 * h}, workspace.options());
    bh = at::empty({3 * h}, workspace.options());
  }
  return {gi, gh, ghx, bi, bh};
}


const std::unordered_map<std::string, HostPrep>& preps() {
  static const auto* table = new std::unordered_map<std::string, HostPrep>{
      {"aten::index.Tensor", index_list_prep(true)},
      {"aten::index.Tensor_out", index_list_prep(true)},
      {"aten::_index_put_impl_", index_list_prep(false)},
      {"aten::index_put", index_list_prep(false)},
      {"aten::index_put_", index_list_prep(false)},
      {"aten::_thnn_fused_lstm_cell", lstm_zero_biases},
  };
  return *table;
}

}  // namespace

const HostPrep* host_prep_for(const std::string& name) {
  auto it = preps().find(name);
  return it == preps().end() ? nullptr : &it->second;
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell_meta));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward_meta));
}

}  // namespace torch_tpu
