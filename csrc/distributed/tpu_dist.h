// tpu_dist: the c10d backend for tpu tensors.
//
// Transport today: every collective stages its tpu operands through host memory and runs on a host c10d backend
// (ProcessGroupGloo, built by torch_tpu/distributed.py from the same store, rank, size and timeout). The results are
// copied back into the caller's tpu tensors, so in-place semantics hold for views too. The host backend is the seam:
// a later transport can run XLA collectives compiled into programs instead (see csrc/distributed/DESIGN.md).
//
// Layering: this is backend-level glue (it uses ATen and c10d); nothing else includes it except its own bindings.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "distributed/mailbox.h"

namespace torch_tpu {

// A collective whose operands were staged to host buffers and handed to the host backend. Completing it waits for the
// host work, then runs `finish` (copies results back into the tpu tensors). Completion happens on the thread that
// asks for it first: wait(), getFuture() (DDP's comm hook), isCompleted() once the host work is done, or the backend
// when a later collective touches a tensor this one writes.
class StagedWork : public c10d::Work {
 public:
  StagedWork(int rank, c10d::OpType type, c10::intrusive_ptr<c10d::Work> host_work, std::vector<at::Tensor> outputs,
             std::function<void()> finish);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  void synchronize() override {}
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits for the host work and copies results back (once); rethrows the work's error on every call.
  void complete(std::chrono::milliseconds timeout = ::kNoTimeout);
  bool done() const;
  // True when this work writes into storage shared with `t` (it must complete before `t` is read or written again).
  bool writes_to(const at::Tensor& t) const;

 private:
  std::mutex complete_mutex_;  // one completer at a time; the base class's mutex_ guards completed_/exception_
  c10::intrusive_ptr<c10d::Work> host_work_;
  std::vector<at::Tensor> outputs_;
  std::function<void()> finish_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_rank_ = -1;
};

// Host staging buffers, reused across collectives of the same byte size: a fresh large host allocation costs page
// faults on every op (tens of ms at 64 MiB), more than the copy itself. Free buffers are capped at kMaxFreeBytes.
class HostPool {
 public:
  static constexpr size_t kMaxFreeBytes = size_t{512} << 20;
  // cpu_zero_copy: on the XLA-CPU plugin, read device buffers with a memcpy and adopt host results as device buffers
  // (off: the plugin's transfers, the path every other plugin takes).
  explicit HostPool(bool cpu_zero_copy = true) : cpu_zero_copy_(cpu_zero_copy) {}
  bool cpu_zero_copy() const { return cpu_zero_copy_; }
  // A contiguous host tensor shaped and typed like `like` (contents undefined).
  at::Tensor acquire(const at::Tensor& like);
  // Gives back what acquire() returned; the caller must hold no other reference it still uses.
  void release(const at::Tensor& t);

 private:
  std::mutex mutex_;
  std::multimap<size_t, at::Tensor> free_;  // byte tensors by size
  size_t free_bytes_ = 0;
  bool cpu_zero_copy_;
};

// The signature exchange of one collective (see check_agreement below). It is started before the operands are staged,
// so its round trip overlaps the device->host copies; verify() waits for it and raises on every rank when they differ.
// Ranks on one host exchange through a shared-memory mailbox (mailbox.h), others through a Gloo all-gather.
class Stage;  // staging.h

class Agreement {
 public:
  Agreement() = default;  // nothing to check
  Agreement(c10d::OpType type, bool shapes, c10::intrusive_ptr<c10d::Work> work, at::Tensor mine,
            std::vector<std::vector<at::Tensor>> gathered)
      : type_(type), shapes_(shapes), work_(std::move(work)), sent_(std::move(mine)), gathered_(std::move(gathered)) {}
  // `mailbox`: this rank's signature of collective `seq` is posted already.
  Agreement(c10d::OpType type, bool shapes, std::shared_ptr<const SharedMailbox> mailbox, uint64_t seq,
            std::chrono::milliseconds timeout)
      : type_(type), shapes_(shapes), mailbox_(std::move(mailbox)), seq_(seq), timeout_(timeout) {}
  void verify();

 private:
  c10d::OpType type_ = c10d::OpType::UNKNOWN;
  bool shapes_ = true;
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor sent_;  // this rank's signature, as the all-gather reads it
  std::vector<std::vector<at::Tensor>> gathered_;
  std::shared_ptr<const SharedMailbox> mailbox_;
  uint64_t seq_ = 0;
  std::chrono::milliseconds timeout_{0};
};

class TpuDistBackend : public c10d::Backend {
 public:
  // check_agreement: before each collective, the ranks exchange a small signature of it (op, dtype, element counts,
  // shapes) and every rank raises when they differ, instead of Gloo crashing, hanging or mixing mismatched buffers.
  TpuDistBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size, std::chrono::milliseconds timeout,
                 bool check_agreement = true, bool cpu_zero_copy = true);

  // Compare signatures through `mailbox` (every rank of the group on this host) instead of the host backend.
  void set_mailbox(std::shared_ptr<SharedMailbox> mailbox) { mailbox_ = std::move(mailbox); }
  bool uses_mailbox() const { return mailbox_ != nullptr; }

  const std::string getBackendName() const override { return "tpu_dist"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10d::Backend> host_backend() const { return host_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Sequence numbers (TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper needs them) are the host backend's.
  void setSequenceNumberForGroup() override { host_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return host_->getSequenceNumberForGroup(); }

  void abort() override;
  void shutdown() override;

 private:
  // Completes every pending work that writes into one of `tensors` , then forgets
  // the completed ones. Keeps a later collective from reading a tensor an earlier async one has not written back yet.
  void settle(const std::vector<at::Tensor>& tensors);
  // Starts the check that the ranks called the same collective with tensors that agree (`shapes` false: only the op,
  // tensor count and dtype must agree, e.g. all_to_all with uneven splits); call verify() before the host collective.
  [[nodiscard]] Agreement agree(c10d::OpType type, const std::vector<at::Tensor>& tensors, bool shapes = true);
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, c10::intrusive_ptr<c10d::Work> host_work,
                                        std::vector<at::Tensor> outputs, std::function<void()> finish);

  using StagePtr = std::shared_ptr<Stage>;
  // What staging hands back: the host collective to run on the host twins, and what completes the work afterwards
  // (the copies back, AVG's division).
  struct HostCall {
    std::function<c10::intrusive_ptr<c10d::Work>()> run;
    std::function<void()> finish;
  };
  // One collective, the way every one but send/recv runs: start the agreement check on `agreed`, settle the pending
  // works that write `touched`, `stage` the host twins (copies in, buffers out, the pairs to copy back), verify the
  // agreement, run the host collective with the Python objects set aside, and launch a work over `outputs`.
  c10::intrusive_ptr<c10d::Work> collective(c10d::OpType type, const std::vector<at::Tensor>& agreed,
                                            const std::vector<at::Tensor>& touched, std::vector<at::Tensor> outputs,
                                            const std::function<HostCall(const StagePtr&)>& stage, bool shapes = true);

  c10::intrusive_ptr<c10d::Backend> host_;
  c10::intrusive_ptr<Options> options_;
  bool check_agreement_;
  std::shared_ptr<SharedMailbox> mailbox_;
  uint64_t collectives_ = 0;  // checked so far (the mailbox's sequence numbers)
  std::shared_ptr<HostPool> pool_;
  std::mutex pending_mutex_;
  std::vector<c10::intrusive_ptr<StagedWork>> pending_;
};

}  // namespace torch_tpu
