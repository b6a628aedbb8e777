#include "distributed/tpu_dist.h"
#include "distributed/staging.h"

#include "exec/device_data.h"
#include "exec/state.h"
#include "exec/sync.h"
#include "lowering/lib/op_context.h"
#include "runtime/counters.h"
#include "runtime/pjrt.h"

#include <ATen/ATen.h>
#include <ATen/ThreadLocalPythonObjects.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <utility>

namespace torch_tpu {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// A Gloo work keeps a copy of the issuing thread's ThreadLocalState and drops it on a Gloo worker thread. backward()
// stashes a Python object in that state (torch 2.13: the contextvars.Context for the autograd threads), so a
// collective issued from a DDP gradient hook would drop a Python reference on the worker; if the interpreter is
// finalizing by then, taking the GIL ends the worker thread inside a noexcept destructor and the process aborts
// ("terminate called without an active exception"). Host collectives are issued with the Python objects set aside:
// no Gloo work runs Python.
template <typename Call>
auto on_host(Call&& call) {
  struct SetAside {
    at::impl::ThreadLocalPythonObjects saved = at::impl::ThreadLocalPythonObjects::get_state();
    SetAside() { at::impl::ThreadLocalPythonObjects::set_state({}); }
    ~SetAside() { at::impl::ThreadLocalPythonObjects::set_state(std::move(saved)); }
    SetAside(const SetAside&) = delete;
    SetAside& operator=(const SetAside&) = delete;
  } aside;
  return call();
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The host backend (Gloo) has no AVG or PREMUL_SUM: both run as SUM, with the inputs scaled first (PREMUL_SUM) or
// the results divided by the group size afterwards (AVG, truncating for integers as NCCL does).
struct ReducePlan {
  ReduceOp host_op;
  bool average = false;
};

ReducePlan plan_reduce(const ReduceOp& op, std::vector<at::Tensor>& host_inputs) {
  ReducePlan plan{op};
  if (op.op_ == ReduceOp::AVG) {
    plan.host_op = ReduceOp(ReduceOp::SUM);
    plan.average = true;
  } else if (op.op_ == ReduceOp::PREMUL_SUM) {
    auto supplement = c10::static_intrusive_pointer_cast<c10d::PreMulSumSupplement>(op.supplement_);
    TORCH_CHECK(supplement, "tpu_dist: ReduceOp.PREMUL_SUM without a factor");
    for (auto& t : host_inputs) {
      t = supplement->tensor_factor.defined() ? t.mul(supplement->tensor_factor.to(at::kCPU))
                                               : t.mul(supplement->double_factor);
    }
    plan.host_op = ReduceOp(ReduceOp::SUM);
  }
  return plan;
}

void divide(const std::vector<at::Tensor>& results, int size) {
  for (const auto& t : results) {
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
      t.div_(size);
    } else {
      t.div_(size, "trunc");
    }
  }
}

// Completion of a reduction: AVG's division by the group size on the host results, then the copy back.
std::function<void()> finish_reduction(std::shared_ptr<Stage> st, std::vector<at::Tensor> results, ReducePlan plan,
                                       int size) {
  return [st, results, plan, size] {
    if (plan.average) divide(results, size);
    st->finish();
  };
}

// Completion of any other collective: the copy back.
std::function<void()> copy_back(const std::shared_ptr<Stage>& st) {
  return [st] { st->finish(); };
}

template <class Opts>
Opts with_op(const Opts& opts, const ReducePlan& plan) {
  Opts o = opts;
  o.reduceOp = plan.host_op;
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
StagedWork::StagedWork(int rank, OpType type, WorkPtr host_work, std::vector<at::Tensor> outputs,
                       std::function<void()> finish)
    : c10d::Work(rank, type),
      host_work_(std::move(host_work)),
      outputs_(std::move(outputs)),
      finish_(std::move(finish)) {
  std::vector<c10::Device> devices;
  for (const auto& t : outputs_) {
    if (on_tpu(t) && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
}

bool StagedWork::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

void StagedWork::complete(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard(complete_mutex_);
  if (done()) {
    if (auto e = exception()) std::rethrow_exception(e);
    return;
  }
  std::exception_ptr error;
  try {
    if (host_work_) {
      host_work_->wait(timeout);
      if (opType_ == OpType::RECVANYSOURCE) source_rank_ = host_work_->sourceRank();
    }
    if (finish_) finish_();
  } catch (...) {
    error = std::current_exception();
  }
  host_work_.reset();
  finish_ = nullptr;  // releases the host buffers
  if (!error) {
    try {
      future_->markCompleted(c10::IValue(outputs_));
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error && !future_->completed()) future_->setError(error);
  finish(error);
  if (error) std::rethrow_exception(error);
}

bool StagedWork::isCompleted() {
  std::unique_lock<std::mutex> guard(complete_mutex_, std::try_to_lock);
  if (!guard.owns_lock()) return false;  // another thread is completing it right now
  if (done()) return true;
  if (host_work_ && !host_work_->isCompleted()) return false;
  guard.unlock();
  try {
    complete();
  } catch (...) {
    // the error stays in exception() / isSuccess()
  }
  return true;
}

bool StagedWork::isSuccess() const { return c10d::Work::isSuccess(); }

std::exception_ptr StagedWork::exception() const { return c10d::Work::exception(); }

int StagedWork::sourceRank() const {
  TORCH_CHECK(opType_ == OpType::RECVANYSOURCE, "sourceRank() is only defined for recv from any source");
  return source_rank_;
}

std::vector<at::Tensor> StagedWork::result() { return outputs_; }

bool StagedWork::wait(std::chrono::milliseconds timeout) {
  complete(timeout);
  return true;
}

void StagedWork::abort() {
  std::unique_lock<std::mutex> guard(complete_mutex_, std::try_to_lock);
  if (guard.owns_lock() && host_work_) {
    try {
      host_work_->abort();
    } catch (...) {
      // the host work cannot be aborted; it will time out
    }
  }
}

c10::intrusive_ptr<c10::ivalue::Future> StagedWork::getFuture() {
  try {
    complete();
  } catch (...) {
    // the future carries the error
  }
  return future_;
}

bool StagedWork::writes_to(const at::Tensor& t) const {
  if (!t.defined() || !t.has_storage()) return false;
  for (const auto& o : outputs_) {
    if (o.defined() && o.has_storage() && o.storage().is_alias_of(t.storage())) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------------
TpuDistBackend::TpuDistBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                               std::chrono::milliseconds timeout, bool check_agreement, bool cpu_zero_copy)
    : c10d::Backend(rank, size),
      host_(std::move(host)),
      options_(c10::make_intrusive<Options>("tpu_dist", timeout)),
      check_agreement_(check_agreement),
      pool_(std::make_shared<HostPool>(cpu_zero_copy)) {
  TORCH_CHECK(host_, "tpu_dist needs a host backend");
  TORCH_CHECK(host_->getRank() == rank && host_->getSize() == size, "tpu_dist: host backend is rank ",
              host_->getRank(), " of ", host_->getSize(), ", expected rank ", rank, " of ", size);
}

void TpuDistBackend::setTimeout(std::chrono::milliseconds timeout) {
  host_->setTimeout(timeout);
  options_->timeout = timeout;
}

void TpuDistBackend::settle(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::intrusive_ptr<StagedWork>> earlier;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const auto& w) { return w->done(); }),
                   pending_.end());
    for (const auto& w : pending_) {
      for (const auto& t : tensors) {
        if (w->writes_to(t)) {
          earlier.push_back(w);
          break;
        }
      }
    }
  }
  for (const auto& w : earlier) w->complete();
}

Agreement TpuDistBackend::agree(OpType type, const std::vector<at::Tensor>& tensors, bool shapes) {
  if (!check_agreement_ || size_ == 1) return {};
  // Signature: op, tensor count, dtype of the first tensor, total elements and a hash of every shape.
  int64_t numel = 0;
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](uint64_t v) { hash = (hash ^ v) * 1099511628211ull; };
  for (const auto& t : tensors) {
    if (!shapes) break;
    numel += t.numel();
    mix(static_cast<uint64_t>(t.dim()));
    for (auto d : t.sizes()) mix(static_cast<uint64_t>(d));
  }
  const int64_t dtype = tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type());
  Signature mine{static_cast<int64_t>(type), static_cast<int64_t>(tensors.size()), dtype, numel,
                 static_cast<int64_t>(hash)};
  if (mailbox_) {
    const uint64_t seq = collectives_++;
    mailbox_->post(seq, mine);
    return Agreement(type, shapes, mailbox_, seq, options_->timeout);
  }
  std::vector<at::Tensor> input{at::tensor(std::vector<int64_t>(mine.begin(), mine.end()), at::kLong)};
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int r = 0; r < size_; ++r) gathered[0].push_back(at::empty({static_cast<int64_t>(mine.size())}, at::kLong));
  auto work = on_host([&] { return host_->allgather(gathered, input); });
  return Agreement(type, shapes, std::move(work), input[0], std::move(gathered));
}

void Agreement::verify() {
  std::vector<Signature> all;
  if (mailbox_) {
    auto mailbox = std::move(mailbox_);
    all = mailbox->gather(seq_, timeout_);
  } else if (work_) {
    auto work = std::move(work_);
    work->wait();
    for (const auto& t : gathered_[0]) {
      Signature sig{};
      std::copy_n(t.data_ptr<int64_t>(), sig.size(), sig.begin());
      all.push_back(sig);
    }
  } else {
    return;
  }
  if (std::all_of(all.begin(), all.end(), [&all](const Signature& s) { return s == all.front(); })) return;
  std::ostringstream msg;
  msg << "tpu_dist: ranks disagree on " << c10d::opTypeToString(type_)
      << " (mismatched collectives, or tensor shapes/dtypes that differ across ranks):";
  for (size_t r = 0; r < all.size(); ++r) {
    const Signature& v = all[r];
    msg << "\n  rank " << r << ": " << c10d::opTypeToString(static_cast<OpType>(v[0])) << ", " << v[1]
        << " tensor(s)";
    if (v[2] >= 0) msg << ", dtype " << c10::toString(static_cast<at::ScalarType>(v[2]));
    if (shapes_) msg << ", " << v[3] << " elements";
  }
  TORCH_CHECK(false, msg.str());
}

WorkPtr TpuDistBackend::launch(OpType type, WorkPtr host_work, std::vector<at::Tensor> outputs,
                               std::function<void()> finish) {
  const bool writes = static_cast<bool>(finish);
  auto work = c10::make_intrusive<StagedWork>(rank_, type, std::move(host_work), std::move(outputs), std::move(finish));
  if (writes) {  // only works with results to copy back can hold up a later collective
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back(work);
  }
  return work;
}


// ---------------------------------------------------------------------------------------------------------------
WorkPtr TpuDistBackend::collective(OpType type, const std::vector<at::Tensor>& agreed,
                                   const std::vector<at::Tensor>& touched, std::vector<at::Tensor> outputs,
                                   const std::function<HostCall(const StagePtr&)>& stage, bool shapes) {
  auto agreement = agree(type, agreed, shapes);  // first: its round trip overlaps the staging copies
  settle(touched);
  auto st = std::make_shared<Stage>(pool_);
  HostCall call = stage(st);
  agreement.verify();
  auto work = on_host(call.run);
  return launch(type, work, std::move(outputs), std::move(call.finish));
}

WorkPtr TpuDistBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  return collective(OpType::BROADCAST, tensors, tensors, tensors, [&](const StagePtr& st) {
    const bool root = rank_ == opts.rootRank;
    auto host = root ? st->in(tensors) : st->out(tensors);
    if (!root) st->back(tensors, host);
    return HostCall{[=, this]() mutable { return host_->broadcast(host, opts); }, copy_back(st)};
  });
}

WorkPtr TpuDistBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return collective(OpType::ALLREDUCE, tensors, tensors, tensors, [&](const StagePtr& st) {
    auto host = st->in_place(tensors);
    auto plan = plan_reduce(opts.reduceOp, host);
    st->back(tensors, host);
    return HostCall{[=, this]() mutable { return host_->allreduce(host, with_op(opts, plan)); },
                    finish_reduction(st, host, plan, size_)};
  });
}

WorkPtr TpuDistBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                            const c10d::AllreduceCoalescedOptions& opts) {
  return collective(OpType::ALLREDUCE_COALESCED, tensors, tensors, tensors, [&](const StagePtr& st) {
    auto host = st->in(tensors);
    auto plan = plan_reduce(opts.reduceOp, host);
    st->back(tensors, host);
    return HostCall{[=, this]() mutable { return host_->allreduce_coalesced(host, with_op(opts, plan)); },
                    finish_reduction(st, host, plan, size_)};
  });
}

WorkPtr TpuDistBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  return collective(OpType::REDUCE, tensors, tensors, tensors, [&](const StagePtr& st) {
    const bool root = rank_ == opts.rootRank;
    auto host = st->in(tensors);
    auto plan = plan_reduce(opts.reduceOp, host);
    if (root) st->back(tensors, host);  // other ranks' tensors stay as they were
    // Only the root's results are copied back, so only they are divided for AVG.
    return HostCall{[=, this]() mutable { return host_->reduce(host, with_op(opts, plan)); },
                    finish_reduction(st, root ? host : std::vector<at::Tensor>{}, plan, size_)};
  });
}

WorkPtr TpuDistBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                  const c10d::AllgatherOptions& opts) {
  auto out_flat = flatten(outputs);
  return collective(OpType::ALLGATHER, inputs, concat(inputs, out_flat), out_flat, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->allgather(host_out, host_in, opts); }, copy_back(st)};
  });
}

WorkPtr TpuDistBackend::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return collective(OpType::_ALLGATHER_BASE, {input, output}, {input, output}, {output}, [&](const StagePtr& st) {
    auto host_in = st->in(input);
    auto host_out = st->out(output);
    st->back(output, host_out);
    return HostCall{[=, this]() mutable { return host_->_allgather_base(host_out, host_in, opts); }, copy_back(st)};
  });
}

WorkPtr TpuDistBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                            std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  auto out_flat = flatten(outputs);
  return collective(OpType::ALLGATHER_COALESCED, inputs, concat(inputs, out_flat), out_flat, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->allgather_coalesced(host_out, host_in, opts); },
                    copy_back(st)};
  });
}

WorkPtr TpuDistBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  auto all = concat(inputs, outputs);
  return collective(OpType::COALESCED, all, all, outputs, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->allgather_into_tensor_coalesced(host_out, host_in, opts); },
                    copy_back(st)};
  });
}

WorkPtr TpuDistBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                               const c10d::GatherOptions& opts) {
  auto out_flat = flatten(outputs);
  return collective(OpType::GATHER, inputs, concat(inputs, out_flat), out_flat, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->gather(host_out, host_in, opts); }, copy_back(st)};
  });
}

WorkPtr TpuDistBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                const c10d::ScatterOptions& opts) {
  return collective(OpType::SCATTER, outputs, concat(outputs, flatten(inputs)), outputs, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->scatter(host_out, host_in, opts); }, copy_back(st)};
  });
}

WorkPtr TpuDistBackend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                       const c10d::ReduceScatterOptions& opts) {
  auto all = concat(outputs, flatten(inputs));
  return collective(OpType::REDUCE_SCATTER, all, all, outputs, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    ReducePlan plan{opts.reduceOp};
    for (auto& list : host_in) plan = plan_reduce(opts.reduceOp, list);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->reduce_scatter(host_out, host_in, with_op(opts, plan)); },
                    finish_reduction(st, host_out, plan, size_)};
  });
}

WorkPtr TpuDistBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                             const c10d::ReduceScatterOptions& opts) {
  return collective(OpType::_REDUCE_SCATTER_BASE, {input, output}, {input, output}, {output}, [&](const StagePtr& st) {
    std::vector<at::Tensor> host_in{st->in(input)};
    auto plan = plan_reduce(opts.reduceOp, host_in);
    auto host_out = st->out(output);
    st->back(output, host_out);
    return HostCall{
        [=, this]() mutable { return host_->_reduce_scatter_base(host_out, host_in[0], with_op(opts, plan)); },
        finish_reduction(st, {host_out}, plan, size_)};
  });
}

WorkPtr TpuDistBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::ReduceScatterOptions& opts) {
  auto all = concat(inputs, outputs);
  return collective(OpType::COALESCED, all, all, outputs, [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto plan = plan_reduce(opts.reduceOp, host_in);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable {
                      return host_->reduce_scatter_tensor_coalesced(host_out, host_in, with_op(opts, plan));
                    },
                    finish_reduction(st, host_out, plan, size_)};
  });
}

WorkPtr TpuDistBackend::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
                                      std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  const bool even = output_split_sizes.empty() && input_split_sizes.empty();
  auto stage = [&](const StagePtr& st) {
    auto host_in = st->in(input);
    auto host_out = st->out(output);
    st->back(output, host_out);
    return HostCall{[=, this]() mutable {
                      return host_->alltoall_base(host_out, host_in, output_split_sizes, input_split_sizes, opts);
                    },
                    copy_back(st)};
  };
  return collective(OpType::ALLTOALL_BASE, {input, output}, {input, output}, {output}, stage, even);
}

WorkPtr TpuDistBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::AllToAllOptions& opts) {
  auto stage = [&](const StagePtr& st) {
    auto host_in = st->in(inputs);
    auto host_out = st->out(outputs);
    st->back(outputs, host_out);
    return HostCall{[=, this]() mutable { return host_->alltoall(host_out, host_in, opts); }, copy_back(st)};
  };
  return collective(OpType::ALLTOALL, inputs, concat(inputs, outputs), outputs, stage, false);
}

WorkPtr TpuDistBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  settle(tensors);
  // Nobody may ever complete a send work, so its host buffers are not pooled: they live as long as the host work.
  Stage st(std::make_shared<HostPool>(pool_->cpu_zero_copy()));
  auto host = st.in(tensors);
  auto work = on_host([&] { return host_->send(host, dst_rank, tag); });
  return launch(OpType::SEND, work, {}, nullptr);
}

WorkPtr TpuDistBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  settle(tensors);
  auto st = std::make_shared<Stage>(pool_);
  auto host = st->out(tensors);
  auto work = on_host([&] { return host_->recv(host, src_rank, tag); });
  st->back(tensors, host);
  return launch(OpType::RECV, work, tensors, [st] { st->finish(); });
}

WorkPtr TpuDistBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  settle(tensors);
  auto st = std::make_shared<Stage>(pool_);
  auto host = st->out(tensors);
  auto work = on_host([&] { return host_->recvAnysource(host, tag); });
  st->back(tensors, host);
  return launch(OpType::RECVANYSOURCE, work, tensors, [st] { st->finish(); });
}

WorkPtr TpuDistBackend::barrier(const c10d::BarrierOptions& opts) {
  agree(OpType::BARRIER, {}).verify();
  auto host_opts = opts;
  host_opts.device = std::nullopt;  // the host backend's barrier runs on host memory
  host_opts.device_ids.clear();
  return launch(OpType::BARRIER, on_host([&] { return host_->barrier(host_opts); }), {}, nullptr);
}

void TpuDistBackend::abort() { host_->abort(); }

void TpuDistBackend::shutdown() { host_->shutdown(); }

}  // namespace torch_tpu
