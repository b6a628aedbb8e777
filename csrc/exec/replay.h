// Compiled graphs run again without dispatching their ops. A compiled graph (torch.compile's forward or backward,
// compile/backend.py) is a fixed sequence of ATen ops over its inputs: once one call has been recorded into the
// fused engine, the program that call lowered to can be run on the next call's inputs directly, so a call costs
// one execution instead of one dispatch per op.
//
// Capture (Python: compile/replay.py) runs one call through the fused engine between begin_capture and
// end_capture, then hands CapturedGraph::capture what the call read and returned. A capture is refused (nothing
// is lost: the call ran normally) when the call did anything a replay could not repeat: ops run outside the
// recording (a host op, a random draw, a hand-built program), a storage read that is neither an input nor made
// by the call, an output that is not a fresh result or a view of an input, or an input it cannot compare.
// An input the call updates in place (a KV cache, a running statistic) is donated to its new contents when nothing
// else holds its buffer, as the fused engine does, so the update does not copy the storage.
// A replay checks that the inputs look exactly like the captured ones (dtype, sizes, strides, offset, storage
// size and contents type, which inputs share a storage, number values); when they do not it declines and the
// caller records the call as usual.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exec/tensor_program.h"

namespace torch_tpu {

struct Recording;

class CapturedGraph {
 public:
  // Lowers `rec` (the call's ops, taken out of the open graph) into one program that reads the inputs and writes
  // the outputs and the inputs it updates, runs it for this call, and returns what a replay needs. Returns null
  // (with `why`) when the call cannot be replayed; the call's results are then still computed.
  // `compile_only` (async_compile's warm-up): the program is compiled in the background and not run, so the call's
  // results are never computed (the caller drops them); the first replay waits for the compilation.
  static std::shared_ptr<CapturedGraph> capture(int device, Recording& rec, const std::vector<c10::IValue>& inputs,
                                                const std::vector<c10::IValue>& outputs, std::string* why,
                                                bool compile_only = false);

  // The outputs of one call on `inputs`, or nothing when `inputs` do not match the capture.
  std::optional<std::vector<c10::IValue>> replay(const std::vector<c10::IValue>& inputs) const;

  int device() const { return device_; }

  // The captured program as torch.export reads it: its text; per argument, the input whose storage it reads or
  // (-1) a fixed buffer (a number of the capture); per result before the checks', the input whose storage it
  // updates or the new storage it fills; per output, what it is (see Output).
  struct Program {
    std::string text;
    std::vector<int> arg_inputs;
    std::vector<std::shared_ptr<Buffer>> fixed_args;
    std::vector<std::pair<int, int>> results;  // (input, fresh), one of them -1
    size_t checks = 0;
  };
  Program program() const;
  struct OutputView {
    bool fresh = false;  // a new storage (index into the results' fresh), else an input (index) returned or viewed
    int index = -1;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    bool none = false;
  };
  std::vector<OutputView> output_views() const;

 private:
  struct Input {
    c10::IValue number;  // a number or None input: compared by value
    bool tensor = false;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    int64_t storage_nbytes = 0;
    bool conj = false, neg = false;
    int group = -1;  // the first input with the same storage
    bool updated = false;  // (first input of a storage) the program writes the storage
    // The storage's contents when captured: a buffer of this element type and count, or none (reads as zeros).
    bool has_buffer = false;
    ElementType element_type = ElementType::kInvalid;
    int64_t element_count = 0;
  };
  struct Output {
    enum Kind { kNone, kInput, kInputView, kFresh } kind = kNone;
    int index = -1;  // kInput: the input returned as is; kInputView: the input viewed; kFresh: the new storage
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
  };
  struct Target {
    int input = -1;  // an input's storage it updates, or
    int fresh = -1;  // a new storage
  };

  int device_ = 0;
  // What the program was built and compiled under: a replay under another precision or other compile options
  // does not match (the call is captured again).
  DotPrecision precision_ = DotPrecision::kHighest;
  uint64_t options_ = 0;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  std::vector<int64_t> fresh_nbytes_;        // per new storage
  // The program, or null with `compiling_` while the background compiler builds it (the first replay fetches it).
  mutable std::mutex exe_mu_;
  mutable std::shared_ptr<Executable> exe_;
  bool compiling_ = false;
  std::shared_ptr<Executable> executable() const;
  std::string text_;
  std::vector<int> arg_inputs_;              // per program argument: the input whose storage it reads, or -1
  std::vector<std::shared_ptr<Buffer>> fixed_args_;  // per program argument when arg_inputs_ is -1
  std::vector<Target> targets_;
  std::vector<CheckReport> checks_;
  std::vector<int> updated_inputs_;          // inputs whose storage the program writes (their versions are bumped)
  // Program arguments (updated inputs) compiled to be donated to their new contents; a replay donates each one
  // whose buffer nothing else holds, and passes the others undonated (XLA then copies them).
  std::vector<size_t> donated_;
};

}  // namespace torch_tpu
