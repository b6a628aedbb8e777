// One StableHLO program over tpu storages: reads tensors (views of storages) as values, writes values into
// tensors (new storage contents that replace the old), creates new tensors, then compiles (cached) and runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exec/device_data.h"
#include "exec/state.h"
#include "hlo/builder.h"
#include "lowering/lib/views.h"

namespace torch_tpu {

class Executable;

// Where a program argument comes from, so that a structural cache hit (exec/graph.cpp) can gather the arguments of
// a compiled graph without lowering it again: a storage's buffer, a number argument of a recorded op (a Scalar, a
// CPU scalar tensor, an element of a number list), a whole number list, or a fixed buffer.
struct ArgSource {
  enum Kind { kFixed, kSlot, kScalar, kList } kind = kFixed;
  const void* data = nullptr;  // kSlot: the storage's DeviceData
  int node = -1;               // kScalar/kList: the op's position in its graph
  int arg = -1;                // kScalar/kList: the op's argument
  int elem = -1;               // kScalar: element of a list argument (-1: the argument itself)
  std::shared_ptr<Buffer> fixed;
  static ArgSource scalar(int node, int arg, int elem = -1) { return {kScalar, nullptr, node, arg, elem, nullptr}; }
  static ArgSource list(int node, int arg) { return {kList, nullptr, node, arg, -1, nullptr}; }
};

// A device check's report (see TensorProgram::add_check).
struct CheckReport {
  std::string message;
  bool index_error = true;
};

// What running a compiled program needs besides its arguments: the executable, where each argument comes from,
// which storages its results replace (in order) and the checks read afterwards.
struct ProgramPlan {
  std::shared_ptr<Executable> exe;
  std::vector<ArgSource> sources;
  std::vector<const void*> targets;  // DeviceData per result, before the checks' results
  std::vector<CheckReport> checks;
  std::vector<size_t> donated;  // argument positions whose buffers the program reuses for results
  std::string text;             // the program (torch.export keeps it)
};

// Runs `exe` on `args` and hands its results to `targets` (DeviceData), then reports the checks (two results each:
// the predicate and the culprit). `donating`: the lock held while old buffers are donated (released once the new
// buffers are in place); `outputs_placed` runs then, before any wait. The shared tail of TensorProgram::run and of
// a structural cache hit. The `donated` arguments are kept until the execution has finished: releasing one before
// PJRT confirms the donation blocks until the whole program has run. `non_donatable`: aliased arguments passed
// without donating them (XLA then copies them into their results), for a program compiled to donate them.
void execute_plan(int device, Executable& exe, const std::vector<std::shared_ptr<Buffer>>& args,
                  const std::vector<size_t>& donated, const std::vector<const void*>& targets,
                  const std::vector<CheckReport>& checks, std::unique_lock<std::shared_mutex>& donating,
                  const std::function<void()>& outputs_placed, const std::vector<int64_t>& non_donatable = {});

// A cached device buffer holding `value` (0-d; PRED, S64 or F64 by the Scalar's kind), as host_scalar uses.
std::shared_ptr<Buffer> scalar_buffer(int device, const c10::Scalar& value);
// A new 1-D F64 device buffer holding `values`, as host_vector uses.
std::shared_ptr<Buffer> vector_buffer(int device, const std::vector<c10::Scalar>& values);

class TensorProgram {
 public:
  // `open_graph`: the device's open graph in fused mode (exec/graph.h), whose storages are marked pending until it
  // runs; otherwise a program that runs at once.
  // A program of its own holds device_mutex() from here until it is destroyed.
  // `precision`: of its matrix products (exec/state.h); the current one when not given.
  explicit TensorProgram(int device, bool open_graph = false, std::optional<DotPrecision> precision = std::nullopt);
  ~TensorProgram();
  TensorProgram(const TensorProgram&) = delete;
  TensorProgram& operator=(const TensorProgram&) = delete;

  HloBuilder& builder() { return b_; }
  int device() const { return device_; }

  // The value of a tpu tensor on this program's device, or of a CPU 0-dim tensor (a runtime scalar; `source` says
  // which recorded argument it is).
  Value read(const at::Tensor& t, const ArgSource& source = {});
  // A program argument fed by an existing buffer (e.g. one just uploaded from the host).
  Value external(std::shared_ptr<Buffer> buffer);
  // A 0-d program argument holding `value` (uploaded now), converted to `dtype`.
  Value host_scalar(const c10::Scalar& value, ElementType dtype, const ArgSource& source = {});
  // A 1-D program argument holding `values` (one upload), converted to `dtype`.
  Value host_vector(const std::vector<c10::Scalar>& values, ElementType dtype, const ArgSource& source = {});
  // Replaces the elements of tpu tensor `target` with `value` (converted to its dtype, broadcast to its shape).
  void write(const at::Tensor& target, const Value& value);
  // A new contiguous tpu tensor holding `value` (converted to `dtype`).
  at::Tensor output(const Value& value, at::ScalarType dtype);

  // Raises IndexError (or RuntimeError) with `message` after the program ran if the predicate `bad` holds anywhere;
  // "{value}" in the message becomes the 0-d integer `culprit`. Checks run on the device and are read when the
  // program completes (no extra host sync inside a graph).
  // Returns the 0-d predicate "the check failed" (for an op to keep its targets as they were when it fails).
  Value add_check(const Value& bad, const std::string& message, bool index_error = true,
                  std::optional<Value> culprit = std::nullopt);

  // Compiles (through the cache) and executes; afterwards every written/created storage holds its new buffer.
  // `plan` (optional) receives what a structural cache needs to run the same program again without lowering it.
  // `compile_only`: the program is handed to the cache's background compiler and not run (torch.compile's
  // async_compile warm-up); the storages it would write keep their old contents (fresh ones stay empty), and
  // `plan` gets no executable.
  void run(ProgramPlan* plan = nullptr, bool compile_only = false);

  // The program's StableHLO text as run() would compile it (its writes, then its checks), without running it.
  std::string program_text() const;

  // Donate exactly these storages' old buffers (decided by the caller before lowering), instead of deciding by
  // reference counts at run().
  void set_donatable(std::set<const void*> donatable) { donatable_ = std::move(donatable); }
  // The ATen op a node was lowered from, kept (for the dump directory's program-<hash>.aten.txt, which TORCH_TRACE
  // reads) only while programs are being dumped.
  void note_op(const std::string& structure) {
    if (dumping_) op_names_.push_back(structure);
  }

  // A storage of this (open) program died: it is no longer read or written here.
  void forget(const void* data);
  bool empty() const { return slots_.empty() && checks_.empty(); }

 private:
  struct StorageSlot {
    DeviceData* data = nullptr;
    std::shared_ptr<Buffer> buffer;  // the contents read (kept alive until the program ran)
    int arg_index = -1;              // its position among the program's arguments, if read from a buffer
    int64_t nbytes = 0;
    bool has_value = false;
    Value value;  // current contents, typed as the last reader/writer wanted
    bool written = false;
    // For the write rule (see write()): every value that held this storage's contents in this program, the builder
    // id before the first of them, and the views read from the current contents (each view's value, before
    // conj/neg bits are applied).
    std::vector<Value> versions;
    int first_id = 0;
    std::vector<std::pair<ViewSpec, Value>> reads;
  };

  StorageSlot& slot(const at::Tensor& t);
  Value storage_value(StorageSlot& s, ElementType dtype);

  void release_storages();

  int device_;
  bool open_graph_;
  std::unique_lock<std::recursive_mutex> device_lock_;
  HloBuilder b_;
  struct Check {
    Value bad;
    std::string message;
    bool index_error;
    std::optional<Value> culprit;
  };
  std::vector<Check> checks_;
  std::vector<std::shared_ptr<Buffer>> args_;
  std::vector<ArgSource> sources_;  // parallel to args_
  std::optional<std::set<const void*>> donatable_;
  bool dumping_ = false;
  std::vector<std::string> op_names_;
  std::map<const void*, StorageSlot> slots_;  // keyed by DeviceData
  std::vector<const void*> slot_order_;
};

// Whether in-place updates may donate a storage's old buffer to its new contents (TorchTPU's
// disable_inplace_buffer_donation turns it off: every update then writes a new buffer). On by default.
void set_inplace_donation(bool on);
bool inplace_donation();

// Uploads host tensor `src` (any layout; converted to `target`'s dtype and shape by the caller) into `target`.
void copy_host_to_device(const at::Tensor& src_contiguous, const at::Tensor& target);
// Downloads tpu tensor `src` into a new contiguous CPU tensor of the same dtype.
at::Tensor copy_device_to_host(const at::Tensor& src);

}  // namespace torch_tpu
