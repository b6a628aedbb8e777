// The eager engine's entry points for building programs. Debug and strict mode give every op a program of its
// own, run at once; fused mode (DeferAndFuse) appends ops to the device's open graph, which runs when a host read,
// synchronize(), a program of its own or the node limit needs its results. Only storages alive when the graph runs
// become outputs, so dead intermediates never occupy device memory.
//
// Ops of the lowering table are *recorded* (record_op): the graph keeps their structure and arguments and lowers
// nothing while every op's structure has been lowered before. When it runs, its structural key (the ops, their
// argument types and views, which storages they share, which are alive, which buffers are donated, and the number
// arguments the lowerings did not take at run time) finds the compiled program and where each of its arguments
// comes from: nothing is lowered or printed. A new structure is lowered as it is recorded (errors surface at the op).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "exec/tensor_program.h"

namespace torch_tpu {

// What lowering an op revealed about its structure: number arguments it took at run time (program arguments, so
// their values stay out of the structural key), whether it baked numbers it computed itself (then every number
// argument is part of the key), and whether it writes arguments its schema does not mark as written.
struct OpFacts {
  std::set<int> runtime_args;  // taken at run time and never read by value
  bool pinned = false;
  bool updates_args = false;
  bool operator==(const OpFacts& o) const {
    return runtime_args == o.runtime_args && pinned == o.pinned && updates_args == o.updates_args;
  }
};

// One op as the structural cache records it.
struct RecordedOp {
  std::string structure;              // all the lowering depends on except storage identity and number values
  std::vector<c10::IValue> args;      // the arguments, tpu tensors as snapshots (views that hold their storage)
  std::vector<int> number_args;       // positions of number arguments (Scalars, CPU scalars, number lists)
  std::vector<at::Tensor> tensors;    // every tpu tensor snapshot it reads or writes: arguments, then results
  std::vector<bool> written;          // parallel to tensors
  // Appends the op to `program` as op number `node`, noting what it learns in `facts`.
  std::function<void(TensorProgram& program, const RecordedOp& op, int node, OpFacts& facts)> lower;
};

// Records (fused) or runs (debug, strict) one op through the structural cache.
void record_op(int device, RecordedOp op);

// Builds one op's worth of program on the program ops of `device` go to now, then runs it or leaves it open.
// `build` must not wait for device values (no reads of storages, no .item()): checks go through add_check.
// In fused mode the recorded ops before it are lowered first and the graph is not cached.
void with_program(int device, const std::function<void(TensorProgram&)>& build);

// Introspection of the device's open graph (fused mode), running nothing: the StableHLO text of the program it would
// run now, and its recorded ops as a graphviz digraph (ops as nodes, an edge where one op reads what another
// wrote). Empty strings when nothing is pending.
std::string pending_program_text(int device);
std::string pending_graph_dot(int device);

// async_compile's warm-up: hands the device's open graph, when only the calling thread's ops are in it and they
// were lowered as they came (a graph's first run), to the background compiler without running it. The storages it
// would write keep their contents (fresh results stay empty: the caller drops them). Otherwise runs it as
// flush_device does and returns false.
bool flush_device_compile_only(int device);

// Runs the open graph of every device (before a mode switch, at exit of a fused region).
void flush_all_devices();
// Ops recorded into a fused graph before it runs on its own.
void set_graph_node_limit(int64_t nodes);
int64_t graph_node_limit();

}  // namespace torch_tpu
