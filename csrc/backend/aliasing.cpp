#include "backend/aliasing.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "backend/lowered_op.h"

namespace torch_tpu {
namespace {

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

std::vector<at::Tensor> tensors_in(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  map_tensors(v, [&](const at::Tensor& t) {
    if (is_tpu(t)) out.push_back(t);
    return t;
  });
  return out;
}

// Whether CPU might refuse: a written tensor that overlaps itself, or that partly overlaps another argument.
bool may_overlap(const std::vector<c10::IValue>& args, const std::vector<bool>& writes) {
  std::vector<at::Tensor> written, all;
  for (size_t i = 0; i < args.size(); ++i) {
    for (const at::Tensor& t : tensors_in(args[i])) {
      all.push_back(t);
      if (writes[i]) written.push_back(t);
    }
  }
  for (const at::Tensor& w : written) {
    if (at::has_internal_overlap(w) != at::MemOverlap::No) return true;
    for (const at::Tensor& t : all) {
      if (t.unsafeGetTensorImpl() == w.unsafeGetTensorImpl()) continue;
      if (at::get_overlap_status(w, t) == at::MemOverlapStatus::Partial) return true;
    }
  }
  return false;
}

// Whether entries at different positions of the lists share memory: per storage, the byte ranges the entries span,
// swept in order (no pairwise comparison: an optimizer's lists hold hundreds of entries).
bool entries_overlap(const std::vector<std::vector<at::Tensor>>& lists, size_t length) {
  struct Span {
    int64_t begin, end;
    size_t entry;
  };
  std::unordered_map<const c10::StorageImpl*, std::vector<Span>> spans;
  for (const auto& list : lists) {
    for (size_t k = 0; k < length && k < list.size(); ++k) {
      const at::Tensor& t = list[k];
      if (!is_tpu(t) || t.numel() == 0) continue;
      int64_t last = t.storage_offset();
      for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
      const int64_t item = static_cast<int64_t>(t.element_size());
      spans[t.storage().unsafeGetStorageImpl()].push_back(Span{t.storage_offset() * item, (last + 1) * item, k});
    }
  }
  for (auto& [storage, list] : spans) {
    std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      // Every later span that starts before this one ends shares bytes with it.
      for (size_t j = i + 1; j < list.size() && list[j].begin < list[i].end; ++j) {
        if (list[j].entry != list[i].entry) return true;
      }
    }
  }
  return false;
}

}  // namespace

void check_overlaps_as_cpu(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                           const std::vector<bool>& writes) {
  if (!may_overlap(args, writes)) return;
  // The same call on the CPU, over zero-filled host storages that alias exactly as the tpu storages do. Only an
  // overlap error is taken from it; anything else the CPU might say is the tpu kernel's to say (or not).
  std::unordered_map<const c10::StorageImpl*, c10::Storage> host;
  auto shadow = [&](const at::Tensor& t) -> at::Tensor {
    if (!is_tpu(t)) return t;
    c10::Storage& s = host[t.storage().unsafeGetStorageImpl()];
    if (!s) s = at::zeros({static_cast<int64_t>(t.storage().nbytes())}, at::kByte).storage();
    at::Tensor h = at::empty({0}, t.options().device(c10::kCPU));
    h.set_(s, t.storage_offset(), t.sizes(), t.strides());
    return h;
  };
  torch::jit::Stack stack;
  for (const c10::IValue& a : args) stack.push_back(map_tensors(a, shadow));
  try {
    op.callBoxed(&stack);
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (message.find("single memory location") != std::string::npos) TORCH_CHECK(false, message);
  }
}

bool run_foreach_in_order(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string& name = schema.name();
  if (name.rfind("aten::_foreach_", 0) != 0 || !schema.returns().empty()) return false;
  const size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  // Entry k of every list argument, in order; entries of different positions that overlap make the calls ordered.
  std::vector<std::vector<at::Tensor>> lists;
  size_t length = 0;
  for (const c10::IValue& a : args) {
    if (!a.isTensorList()) continue;
    lists.push_back(a.toTensorVector());
    length = lists.back().size();
  }
  if (!entries_overlap(lists, length)) return false;
  torch::jit::drop(*stack, n);
  for (size_t k = 0; k < length; ++k) {
    torch::jit::Stack one;
    for (const c10::IValue& a : args) {
      if (a.isTensorList()) {
        one.emplace_back(std::vector<at::Tensor>{a.toTensorVector().at(k)});
      } else if (a.isList() && a.toListRef().size() == length) {  // a ScalarList: its k-th number
        c10::impl::GenericList entry(a.toList().elementType());
        entry.push_back(a.toListRef().at(k));
        one.emplace_back(std::move(entry));
      } else {
        one.push_back(a);
      }
    }
    op.callBoxed(&one);
  }
  return true;
}

}  // namespace torch_tpu
