// Staging through host memory, as every tpu_dist collective does today: host twins of the operands (pooled buffers,
// or the device buffer's own memory on XLA-CPU), and the copy back of the results.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "distributed/tpu_dist.h"
#include "exec/device_data.h"
#include "lowering/lib/op_context.h"
#include "exec/state.h"
#include "exec/sync.h"
#include "runtime/counters.h"

namespace torch_tpu {

inline bool on_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// Reads a device buffer with one memcpy on XLA-CPU (false when that does not apply: another plugin, a short buffer).
bool read_host_visible(const Buffer& buffer, void* dst, size_t nbytes);
// On XLA-CPU, the host address of a computed device buffer; null elsewhere.
void* host_address(const Buffer& buffer);
// Whether `t` covers its whole storage, contiguously, with no conj/neg bit.
bool whole_storage(const at::Tensor& t);
// On XLA-CPU, makes the host result `host` the device buffer of `dst` (a whole storage) without a copy.
bool adopt_as_device_buffer(const at::Tensor& dst, const at::Tensor& host, const std::shared_ptr<HostPool>& pool);

// The host side of one collective: host twins of its operands, and what to copy back into which user tensor when the
// host work is done. tpu operands get pooled host buffers (given back by finish()); host operands are used as they
// are (the host backend checks them itself).
class Stage {
 public:
  explicit Stage(std::shared_ptr<HostPool> pool) : pool_(std::move(pool)) {}

  // Host twin of an operand whose contents the collective reads. A whole tpu storage is copied straight from its
  // PJRT buffer; views go through the generic copy.
  at::Tensor in(const at::Tensor& t) {
    if (!on_tpu(t)) return t;
    at::Tensor host = take(t);
    if (t.numel() == 0) return host;
    std::shared_ptr<Buffer> buffer = device_data(t.storage()).buffer();
    if (buffer && whole_storage(t) && buffer->element_type() == element_type_of(t.scalar_type())) {
      const auto nbytes = static_cast<size_t>(host.nbytes());
      if (!pool_->cpu_zero_copy() || !read_host_visible(*buffer, host.data_ptr(), nbytes)) {
        buffer->to_host(host.data_ptr(), nbytes);
      }
    } else {
      host.copy_(t);
    }
    return host;
  }
  // An operand reduced where it lies (all_reduce on the XLA-CPU plugin). A whole storage whose buffer only the storage
  // holds, with no program in flight on its device and no open graph referring to it, goes to the host backend as a
  // CPU tensor over the device buffer's own memory: nothing is staged in or copied back. As with Gloo on CPU
  // tensors, the tensor then changes in place; reading it before the work completes is a race there too. Any other
  // operand is staged as by in().
  at::Tensor in_place(const at::Tensor& t) {
    if (!pool_->cpu_zero_copy() || !on_tpu(t) || t.numel() == 0 || !whole_storage(t)) return in(t);
    DeviceData& data = device_data(t.storage());
    if (data.membership() != DeviceData::kNone || !device_idle(t.device().index())) return in(t);
    std::shared_ptr<Buffer> buffer = data.buffer();
    // held by the storage and here only: no other storage, copy in flight or program argument list reads it
    if (!buffer || buffer.use_count() != 2 || buffer->element_type() != element_type_of(t.scalar_type())) return in(t);
    void* address = host_address(*buffer);
    if (address == nullptr) return in(t);
    at::Tensor host = at::from_blob(
        address, t.sizes(), [keep = std::move(buffer)](void*) {}, t.options().device(at::kCPU));
    in_place_.push_back(host);
    runtime_counters().dist_in_place++;
    return host;
  }
  std::vector<at::Tensor> in_place(const std::vector<at::Tensor>& ts) {
    return map(ts, [this](auto& t) { return in_place(t); });
  }

  // Host twin of an operand the collective only writes.
  at::Tensor out(const at::Tensor& t) { return on_tpu(t) ? take(t) : t; }

  std::vector<at::Tensor> in(const std::vector<at::Tensor>& ts) { return map(ts, [this](auto& t) { return in(t); }); }
  std::vector<at::Tensor> out(const std::vector<at::Tensor>& ts) { return map(ts, [this](auto& t) { return out(t); }); }
  std::vector<std::vector<at::Tensor>> in(const std::vector<std::vector<at::Tensor>>& lists) {
    std::vector<std::vector<at::Tensor>> r;
    for (const auto& l : lists) r.push_back(in(l));
    return r;
  }
  std::vector<std::vector<at::Tensor>> out(const std::vector<std::vector<at::Tensor>>& lists) {
    std::vector<std::vector<at::Tensor>> r;
    for (const auto& l : lists) r.push_back(out(l));
    return r;
  }

  void back(const at::Tensor& dst, const at::Tensor& src) {
    if (!dst.is_same(src) && !holds(in_place_, src)) pairs_.emplace_back(dst, src);
  }
  void back(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src) {
    for (size_t i = 0; i < dst.size(); ++i) back(dst[i], src[i]);
  }
  void back(const std::vector<std::vector<at::Tensor>>& dst, const std::vector<std::vector<at::Tensor>>& src) {
    for (size_t i = 0; i < dst.size(); ++i) back(dst[i], src[i]);
  }

  // Copies the results back into the user tensors, then gives the host buffers back to the pool.
  void finish() {
    for (const auto& [dst, src] : pairs_) {
      if (pool_->cpu_zero_copy() && holds(taken_, src) && adopt_as_device_buffer(dst, src, pool_)) {
        adopted_.push_back(src);  // the pool gets it back from PJRT, later
      } else {
        dst.copy_(src);
      }
    }
    pairs_.clear();
    for (const auto& t : taken_) {
      if (!holds(adopted_, t)) {
        pool_->release(t);
      }
    }
    taken_.clear();
    adopted_.clear();
    in_place_.clear();  // the device buffers they kept alive are the storages' again
  }

 private:
  static bool holds(const std::vector<at::Tensor>& ts, const at::Tensor& t) {
    return std::any_of(ts.begin(), ts.end(), [&t](const at::Tensor& a) { return a.is_same(t); });
  }
  at::Tensor take(const at::Tensor& like) {
    taken_.push_back(pool_->acquire(like));
    return taken_.back();
  }
  template <class F>
  static std::vector<at::Tensor> map(const std::vector<at::Tensor>& ts, F f) {
    std::vector<at::Tensor> r;
    r.reserve(ts.size());
    for (const auto& t : ts) r.push_back(f(t));
    return r;
  }

  std::shared_ptr<HostPool> pool_;
  std::vector<at::Tensor> taken_;
  std::vector<at::Tensor> adopted_;
  std::vector<at::Tensor> in_place_;  // CPU views of device buffers reduced in place (see in_place)
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs_;
};

}  // namespace torch_tpu
