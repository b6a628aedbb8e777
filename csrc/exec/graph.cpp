#include "exec/graph.h"
#include "exec/recording.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "exec/state.h"
#include "exec/sync.h"
#include "lowering/lib/op_context.h"
#include "runtime/counters.h"
#include "runtime/error.h"

namespace torch_tpu {
namespace {

constexpr int kMaxDevices = 64;

// ---- What earlier lowerings taught: per op structure, per graph structure ------------------------------------

class FactsTable {
 public:
  // Null when the structure was never lowered.
  std::shared_ptr<const OpFacts> find(const std::string& structure) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = facts_.find(structure);
    return it == facts_.end() ? nullptr : it->second;
  }
  // Returns whether `facts` differ from what was known.
  bool learn(const std::string& structure, const OpFacts& facts) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = facts_.find(structure);
    if (it != facts_.end() && *it->second == facts) return false;
    if (facts_.size() >= kLimit) facts_.clear();  // bounded, whatever the workload
    facts_[structure] = std::make_shared<const OpFacts>(facts);
    return true;
  }

 private:
  static constexpr size_t kLimit = 16384;
  std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const OpFacts>> facts_;
};

FactsTable& facts_table() {
  static FactsTable* t = new FactsTable();  // never destroyed: used until process exit
  return *t;
}

// A compiled graph and how to feed it: argument sources name recorded slots (by index) and op arguments.
struct CachedGraph {
  ProgramPlan plan;                // kSlot sources carry the slot index in `node`
  std::vector<int> target_slots;   // per result
  bool donates = false;
};

class GraphCache {
 public:
  std::shared_ptr<const CachedGraph> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = graphs_.find(key);
    return it == graphs_.end() ? nullptr : it->second;
  }
  void add(const std::string& key, std::shared_ptr<const CachedGraph> graph) {
    std::lock_guard<std::mutex> lock(mu_);
    if (graphs_.size() >= kLimit) graphs_.clear();
    graphs_[key] = std::move(graph);
  }

 private:
  // Each graph holds an executable (mapped code pages: up to ~150 regions for one with loops).
  static constexpr size_t kLimit = 256;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const CachedGraph>> graphs_;
};

GraphCache& graph_cache() {
  static GraphCache* c = new GraphCache();  // never destroyed: holds executables (no PJRT calls at teardown)
  return *c;
}

// ---- Number arguments -------------------------------------------------------------------------------------------

c10::Scalar number_of(const c10::IValue& v) {
  if (v.isTensor()) return cpu_scalar_value(v.toTensor());
  return v.toScalar();
}

c10::Scalar number_at(const RecordedOp& op, int arg, int elem) {
  const c10::IValue& v = op.args.at(static_cast<size_t>(arg));
  if (elem < 0) return number_of(v);
  if (v.isDoubleList()) return v.toDoubleList().get(static_cast<size_t>(elem));
  if (v.isIntList()) return v.toIntList().get(static_cast<size_t>(elem));
  if (v.isBoolList()) return v.toBoolList().get(static_cast<size_t>(elem));
  return number_of(v.toListRef().at(static_cast<size_t>(elem)));
}

std::vector<c10::Scalar> numbers_of(const RecordedOp& op, int arg) {
  const c10::IValue& v = op.args.at(static_cast<size_t>(arg));
  std::vector<c10::Scalar> out;
  if (!v.isList()) return out;
  size_t n = v.toListRef().size();
  for (size_t k = 0; k < n; ++k) out.push_back(number_at(op, arg, static_cast<int>(k)));
  return out;
}

void append_number(std::string& key, const c10::Scalar& s) {
  char buf[48];
  if (s.isBoolean()) {
    key += s.toBool() ? "bt" : "bf";
  } else if (s.isIntegral(false)) {
    std::snprintf(buf, sizeof(buf), "i%lld", static_cast<long long>(s.toLong()));
    key += buf;
  } else if (s.isComplex()) {
    c10::complex<double> z = s.toComplexDouble();
    std::snprintf(buf, sizeof(buf), "c%a,%a", z.real(), z.imag());
    key += buf;
  } else {
    std::snprintf(buf, sizeof(buf), "d%a", s.toDouble());
    key += buf;
  }
}

void append_number_arg(std::string& key, const c10::IValue& v) {
  if (v.isNone()) {
    key += 'N';
  } else if (v.isList()) {
    key += '[';
    for (const c10::IValue& e : v.toListRef()) {
      append_number(key, number_of(e));
      key += ',';
    }
    key += ']';
  } else if (v.isTensor()) {
    key += 't';
    key += std::to_string(static_cast<int>(v.toTensor().scalar_type()));
    append_number(key, cpu_scalar_value(v.toTensor()));
  } else {
    append_number(key, v.toScalar());
  }
  key += ';';
}

// An op's structure and the values of the numbers its lowering did not take at run time: two ops with equal node
// keys lower to the same program text.
void append_node_key(std::string& key, const RecordedOp& op, const OpFacts& f) {
  key += op.structure;
  key += '|';
  for (int a : op.number_args) {
    if (!f.pinned && f.runtime_args.count(a) > 0) {
      key += "R;";
    } else {
      append_number_arg(key, op.args.at(static_cast<size_t>(a)));
    }
  }
}

// Node keys lowered before (bounded). An op is recorded without lowering only when its node key is here, so an
// error its rule raises for particular values (a negative integer power) surfaces at the op, not at a later sync.
class SeenNodes {
 public:
  bool contains(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_.count(key) > 0;
  }
  void add(std::string key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (keys_.size() >= kLimit) keys_.clear();
    keys_.insert(std::move(key));
  }

 private:
  static constexpr size_t kLimit = 65536;
  std::mutex mu_;
  std::unordered_set<std::string> keys_;
};

SeenNodes& seen_nodes() {
  static SeenNodes* s = new SeenNodes();
  return *s;
}

}  // namespace

// ---- A recorded graph ---------------------------------------------------------------------------------------------

void Recording::add(RecordedOp op, const std::string& node_key, bool updates_args, bool mark_membership) {
  if (ops.empty() && mark_membership) {  // an open graph: sized as the last one, not grown by reallocation
    const RecordingSize& last = last_recording_size();
    key.reserve(last.key.load(std::memory_order_relaxed));
    ops.reserve(last.ops.load(std::memory_order_relaxed));
    slots.reserve(last.slots.load(std::memory_order_relaxed));
    slot_of.reserve(last.slots.load(std::memory_order_relaxed));
  }
  key += node_key;
  for (size_t i = 0; i < op.tensors.size(); ++i) {
    const at::Tensor& t = op.tensors[i];
    DeviceData* data = &device_data(t.storage());
    auto it = slot_of.find(data);
    int index;
    if (it == slot_of.end()) {
      index = static_cast<int>(slots.size());
      slot_of.emplace(data, index);
      slots.push_back(Slot{data, t.unsafeGetTensorImpl(), 0, false});
    } else {
      index = it->second;
    }
    Slot& s = slots[static_cast<size_t>(index)];
    s.snapshots++;
    bool writes = op.written[i] || updates_args;
    s.written = s.written || writes;
    if (mark_membership) {
      int m = writes ? DeviceData::kWritten : DeviceData::kRead;
      if (data->membership() < m) data->set_membership(m);
    }
    char digits[16];
    digits[0] = '#';
    char* end = std::to_chars(digits + 1, digits + sizeof(digits) - 1, index).ptr;
    *end++ = writes ? 'w' : 'r';
    key.append(digits, end);
  }
  key += '\n';
  ops.push_back(std::move(op));
}

void lower_op(TensorProgram& program, const RecordedOp& op, int node, bool* facts_changed) {
  OpFacts learnt;
  program.note_op(op.structure);
  op.lower(program, op, node, learnt);
  bool changed = facts_table().learn(op.structure, learnt);
  if (facts_changed != nullptr) *facts_changed = *facts_changed || changed;
  std::string key;
  append_node_key(key, op, learnt);
  seen_nodes().add(std::move(key));
}

std::shared_ptr<Buffer> number_source_buffer(int device, const std::vector<RecordedOp>& ops, const ArgSource& src) {
  const RecordedOp& op = ops.at(static_cast<size_t>(src.node));
  if (src.kind == ArgSource::kList) return vector_buffer(device, numbers_of(op, src.arg));
  return scalar_buffer(device, number_at(op, src.arg, src.elem));
}

void reset_membership(const Recording& rec) {
  for (const Slot& s : rec.slots) {
    if (s.data != nullptr) s.data->set_membership(DeviceData::kNone);
  }
}

RecordingSize& last_recording_size() {
  static RecordingSize size;
  return size;
}

// Runs a recording: from the structural cache when its key is known, else lowered (and then remembered).
void run_recording(int device, Recording& rec) {
  if (rec.ops.size() > 1) {  // one-op recordings (strict mode) are not worth reserving for
    RecordingSize& size = last_recording_size();
    size.key.store(rec.key.size(), std::memory_order_relaxed);
    size.ops.store(rec.ops.size(), std::memory_order_relaxed);
    size.slots.store(rec.slots.size(), std::memory_order_relaxed);
  }
  for (const Slot& s : rec.slots) {
    if (s.data == nullptr) {
      reset_membership(rec);
      fail(ErrorCode::kInternal, "fused graph",
           "the device memory of a storage the open graph reads was replaced before the graph ran");
    }
  }
  // The key: what is outside the ops (their products' precision, the compile options) and the recorded structure.
  std::string key = std::to_string(static_cast<int>(rec.precision)) + ':' +
                    std::to_string(backend_state().cache->options_fingerprint()) + ';' + rec.key;
  std::vector<std::shared_ptr<Buffer>> buffers(rec.slots.size());
  std::vector<bool> alive(rec.slots.size());
  std::set<const void*> donatable;
  // Donation is decided and the new buffers put in place under the donation lock (see device_data.h), so no
  // reader can take a buffer between the decision and the swap.
  std::unique_lock<std::shared_mutex> donating(donation_mutex(), std::defer_lock);
  for (const Slot& s : rec.slots) {
    if (s.written) {
      donating.lock();
      break;
    }
  }
  for (size_t i = 0; i < rec.slots.size(); ++i) {
    const Slot& s = rec.slots[i];
    // Alive = held by something besides this recording's snapshots (a user tensor, a view, autograd).
    alive[i] = static_cast<int>(s.snapshot->storage().use_count()) > s.snapshots;
    buffers[i] = donating.owns_lock() ? s.data->raw_buffer_donating() : s.data->raw_buffer();
    key += alive[i] ? 'A' : 'D';
    if (buffers[i]) {
      key += std::to_string(static_cast<int>(buffers[i]->element_type()));
      key += ':';
      key += std::to_string(buffers[i]->element_count());
      // Donatable when only the storage holds its buffer (and the local copy just taken).
      if (s.written && alive[i] && buffers[i].use_count() == 2 && inplace_donation()) {
        donatable.insert(s.data);
        key += '*';
      }
    }
    key += ',';
  }

  if (std::shared_ptr<const CachedGraph> hit = graph_cache().find(key)) {
    runtime_counters().graph_cache_hits++;
    if (!hit->plan.exe) {  // nothing the graph computes is alive: there is nothing to run
      reset_membership(rec);
      return;
    }
    std::vector<std::shared_ptr<Buffer>> args;
    args.reserve(hit->plan.sources.size());
    for (const ArgSource& src : hit->plan.sources) {
      switch (src.kind) {
        case ArgSource::kSlot:
          args.push_back(buffers.at(static_cast<size_t>(src.node)));
          break;
        case ArgSource::kScalar:
        case ArgSource::kList:
          args.push_back(number_source_buffer(device, rec.ops, src));
          break;
        case ArgSource::kFixed:
          args.push_back(src.fixed);
          break;
      }
    }
    std::vector<const void*> targets;
    for (int t : hit->target_slots) targets.push_back(rec.slots.at(static_cast<size_t>(t)).data);
    if (hit->donates) runtime_counters().donations += static_cast<int64_t>(donatable.size());
    buffers.clear();  // the program's arguments hold what it reads; donated buffers must not be held here
    execute_plan(device, *hit->plan.exe, args, hit->plan.donated, targets, hit->plan.checks, donating,
                 [&] { reset_membership(rec); });
    return;
  }

  runtime_counters().graph_cache_misses++;
  buffers.clear();
  if (donating.owns_lock()) donating.unlock();  // lowering reads buffers; run() decides again under the lock
  bool facts_changed = false;
  ProgramPlan plan;
  {
    TensorProgram program(device, /*open_graph=*/true, rec.precision);
    program.set_donatable(donatable);
    for (size_t i = 0; i < rec.ops.size(); ++i) lower_op(program, rec.ops[i], static_cast<int>(i), &facts_changed);
    for (size_t i = 0; i < rec.slots.size(); ++i) {
      if (!alive[i]) program.forget(rec.slots[i].data);
    }
    try {
      program.run(&plan);
    } catch (...) {
      reset_membership(rec);
      throw;
    }
  }
  reset_membership(rec);
  if (facts_changed) return;  // the key was computed from outdated facts: the next run stores it
  auto cached = std::make_shared<CachedGraph>();
  if (!plan.exe) {  // no live results and no checks: remembered, so the next such graph is not lowered again
    graph_cache().add(key, std::move(cached));
    return;
  }
  cached->plan = plan;
  for (ArgSource& src : cached->plan.sources) {
    if (src.kind != ArgSource::kSlot) continue;
    auto it = rec.slot_of.find(src.data);
    if (it == rec.slot_of.end()) return;  // a storage outside the recording: not cacheable
    src.node = it->second;
    src.data = nullptr;
  }
  for (const void* t : plan.targets) {
    auto it = rec.slot_of.find(t);
    if (it == rec.slot_of.end()) return;
    cached->target_slots.push_back(it->second);
    cached->donates = cached->donates || donatable.count(t) > 0;
  }
  cached->plan.targets.clear();
  graph_cache().add(key, std::move(cached));
}

namespace {

// Whether `op` can be recorded without lowering: its structure and its baked numbers were lowered before.
// `node_key` and `facts` are set when it can.
bool known_op(const RecordedOp& op, std::string& node_key, std::shared_ptr<const OpFacts>& facts) {
  facts = facts_table().find(op.structure);
  if (!facts) return false;
  node_key.reserve(op.structure.size() + 16);
  append_node_key(node_key, op, *facts);
  return seen_nodes().contains(node_key);
}

// ---- The open graph of each device -------------------------------------------------------------------------------

struct OpenGraph {
  std::recursive_mutex mu;  // device_mutex(): the autograd thread and the user's thread append to the same graph
  Recording recording;      // ops recorded, not lowered (cacheable)
  std::unique_ptr<TensorProgram> program;  // ops lowered as they came (after a new structure or a custom build)
  int lowered = 0;          // ops in `program`
  int64_t nodes = 0;
  int building = 0;  // ops being appended (nested dispatch counts): running the graph now would cut them in half
  uint64_t runs = 0;  // times the graph ran (a capture is valid only if none ran in between)
  int capturing = 0;  // captures in progress: no node limit
  DotPrecision precision = DotPrecision::kHighest;  // of the products of the ops in it (start_or_continue)
  std::thread::id owner;  // the thread whose op opened the graph
  bool shared = false;    // ops of another thread joined it
};

std::array<OpenGraph, kMaxDevices>& graphs() {
  static std::array<OpenGraph, kMaxDevices> g;
  return g;
}

OpenGraph& graph_of(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "tpu device index ", device, " is out of range");
  return graphs()[static_cast<size_t>(device)];
}

std::atomic<int64_t> g_node_limit{4096};

// Switches the open graph to lowering as ops come: what was recorded is lowered now, in order.
TensorProgram& lowering_program(int device, OpenGraph& g) {
  if (g.program) return *g.program;
  g.program = std::make_unique<TensorProgram>(device, /*open_graph=*/true, g.precision);
  Recording recorded = std::move(g.recording);
  g.recording = Recording();
  reset_membership(recorded);  // the program marks what it reads and writes
  for (size_t i = 0; i < recorded.ops.size(); ++i) lower_op(*g.program, recorded.ops[i], g.lowered++);
  return *g.program;
  // `recorded` (its snapshots) dies here: storages only it held are forgotten by the program.
}

// Before an op joins the open graph: a graph's products share one precision, so a graph recorded under another
// runs first; an empty graph takes the current one.
void start_or_continue(int device, OpenGraph& g) {
  if (g.building > 0) return;  // an op inside another op's recording joins that op's graph
  DotPrecision now = current_dot_precision();
  bool empty = !g.program && g.recording.empty();
  if (!empty && g.precision != now) {
    flush_device(device);
    empty = true;
  }
  if (empty) {
    g.precision = g.recording.precision = now;
    g.owner = std::this_thread::get_id();
    g.shared = false;
  } else if (g.owner != std::this_thread::get_id()) {
    g.shared = true;
  }
}

void count_node(int device, OpenGraph& g) {
  if (g.building > 0 || g.capturing > 0) return;  // inside another op's recording, or a capture
  if (++g.nodes >= g_node_limit.load()) flush_device(device);
}

}  // namespace

std::recursive_mutex& device_mutex(int device) { return graph_of(device).mu; }

void flush_device(int device) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (!g.program && g.recording.empty()) return;
  if (g.building > 0) {
    fail(ErrorCode::kInternal, "flush_device",
         "an op's lowering waited for device values while it was being recorded into the fused graph");
  }
  g.nodes = 0;
  g.runs++;
  if (g.program) {
    std::unique_ptr<TensorProgram> program = std::move(g.program);
    g.lowered = 0;
    program->run();
    return;
  }
  Recording rec = std::move(g.recording);
  g.recording = Recording();
  run_recording(device, rec);
}

bool flush_device_compile_only(int device) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (!g.program && g.recording.empty()) return true;
  if (g.shared || !g.program || g.owner != std::this_thread::get_id() || g.building > 0) {
    flush_device(device);  // not the caller's alone, or a recording (cheap to run, and a capture takes those)
    return false;
  }
  g.nodes = 0;
  g.runs++;
  std::unique_ptr<TensorProgram> program = std::move(g.program);
  g.lowered = 0;
  program->run(nullptr, /*compile_only=*/true);
  return true;
}

void forget_in_graph(int device, const void* data) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (g.program) {
    g.program->forget(data);
    return;
  }
  // A storage's DataPtr replaced under the recording: its slot must not be touched again (see run_recording).
  auto it = g.recording.slot_of.find(data);
  if (it != g.recording.slot_of.end()) g.recording.slots[static_cast<size_t>(it->second)].data = nullptr;
}

void flush_all_devices() {
  for (int d = 0; d < kMaxDevices; ++d) {
    OpenGraph& g = graphs()[static_cast<size_t>(d)];
    std::lock_guard<std::recursive_mutex> lock(g.mu);
    if (g.program || !g.recording.empty()) flush_device(d);
  }
}

uint64_t begin_capture(int device) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (g.program || !g.recording.empty()) flush_device(device);
  g.capturing++;
  return g.runs;
}

bool end_capture(int device, uint64_t token, const std::function<void(Recording&)>& use) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (g.capturing > 0) g.capturing--;
  if (!use || g.runs != token || g.program || g.building > 0 || g.recording.empty()) return false;
  Recording rec = std::move(g.recording);
  g.recording = Recording();
  g.nodes = 0;
  try {
    use(rec);
  } catch (...) {
    reset_membership(rec);
    throw;
  }
  reset_membership(rec);
  return true;
}

std::string pending_program_text(int device) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (g.program) return g.program->program_text();
  if (g.recording.empty()) return "";
  // A scratch program over the same storages: it marks and unmarks their membership, so the marks the recording
  // set are saved and put back.
  std::vector<int> marks;
  for (const Slot& s : g.recording.slots) marks.push_back(s.data != nullptr ? s.data->membership() : DeviceData::kNone);
  std::string text;
  {
    TensorProgram scratch(device, /*open_graph=*/true, g.recording.precision);
    for (size_t i = 0; i < g.recording.ops.size(); ++i) lower_op(scratch, g.recording.ops[i], static_cast<int>(i));
    text = scratch.program_text();
  }
  for (size_t i = 0; i < marks.size(); ++i) {
    if (g.recording.slots[i].data != nullptr) g.recording.slots[i].data->set_membership(marks[i]);
  }
  return text;
}

std::string pending_graph_dot(int device) {
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  // Ops of a new structure are lowered as they come, into one program: then the ops are no longer told apart.
  if (g.program) return "digraph pending {\n  n0 [label=\"program lowered as recorded\"];\n}\n";
  if (g.recording.empty()) return "";
  std::string dot = "digraph pending {\n";
  std::unordered_map<int, size_t> writer;  // slot -> last op that wrote it
  for (size_t i = 0; i < g.recording.ops.size(); ++i) {
    const RecordedOp& op = g.recording.ops[i];
    dot += "  n" + std::to_string(i) + " [label=\"" + op.structure.substr(0, op.structure.find('(')) + "\"];\n";
    for (size_t t = 0; t < op.tensors.size(); ++t) {
      auto slot = g.recording.slot_of.find(&device_data(op.tensors[t].storage()));
      if (slot == g.recording.slot_of.end()) continue;
      auto w = writer.find(slot->second);
      if (!op.written[t] && w != writer.end() && w->second != i) {
        dot += "  n" + std::to_string(w->second) + " -> n" + std::to_string(i) + ";\n";
      }
      if (op.written[t]) writer[slot->second] = i;
    }
  }
  return dot + "}\n";
}

void set_graph_node_limit(int64_t nodes) { g_node_limit = std::max<int64_t>(nodes, 1); }
int64_t graph_node_limit() { return g_node_limit.load(); }

void record_op(int device, RecordedOp op) {
  runtime_counters().graph_nodes++;
  std::string node_key;
  std::shared_ptr<const OpFacts> facts;
  bool known = known_op(op, node_key, facts);
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  if (eager_mode() != EagerMode::kFused) {
    if (!known) {  // a new structure: lowered now, so its errors surface here
      TensorProgram program(device);
      lower_op(program, op, 0);
      program.run();
      return;
    }
    Recording rec;
    rec.precision = current_dot_precision();
    rec.add(std::move(op), node_key, facts->updates_args, /*mark_membership=*/false);
    run_recording(device, rec);
    return;
  }
  start_or_continue(device, g);
  ++g.building;
  try {
    if (known && !g.program) {
      g.recording.add(std::move(op), node_key, facts->updates_args, /*mark_membership=*/true);
    } else {
      TensorProgram& program = lowering_program(device, g);
      lower_op(program, op, g.lowered++);
    }
  } catch (...) {
    --g.building;
    throw;
  }
  --g.building;
  count_node(device, g);
}

void with_program(int device, const std::function<void(TensorProgram&)>& build) {
  runtime_counters().graph_nodes++;
  if (eager_mode() != EagerMode::kFused) {
    TensorProgram program(device);
    build(program);
    program.run();
    return;
  }
  OpenGraph& g = graph_of(device);
  std::lock_guard<std::recursive_mutex> lock(g.mu);
  start_or_continue(device, g);
  ++g.building;
  try {
    build(lowering_program(device, g));
  } catch (...) {
    --g.building;
    throw;
  }
  --g.building;
  count_node(device, g);
}

}  // namespace torch_tpu
