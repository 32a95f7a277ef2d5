#include "callback/ffi_dispatch.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "callback/execution_state.h"
#include "base/happens_before.h"
#include "base/trace.h"
#include "callback/ordered_delivery.h"

namespace plugboard::internal {

namespace {

// Bound (or reserved) slots hold their TargetSlot; a free slot holds null. Binding and releasing take
// g_bind_mutex; the handlers read their slot without it.
std::array<std::atomic<const TargetSlot*>, kMaxCallbackTargets> g_slots{};
std::mutex g_bind_mutex;
size_t g_bound = 0;  // non-null entries of g_slots

// Small arrays on the stack: the common callback has a handful of operands. The inline storage is
// default-initialized only (plain C descriptions stay unwritten until collected: each element is
// written before it is read).
template <class T, size_t N = 8>
class SmallVector {
 public:
  explicit SmallVector(size_t n) : size_(n) {
    if (n > N) heap_.resize(n);
  }
  T* data() { return size_ > N ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  size_t size() const { return size_; }
  std::span<T> span() { return {data(), size_}; }
  void shrink(size_t n) {  // to the first n elements
    if (n > N || size_ <= N) {
      size_ = std::min(n, size_);
      return;
    }
    std::copy_n(heap_.begin(), n, inline_.begin());  // back from the heap to the inline storage
    size_ = n;
  }

 private:
  size_t size_;
  std::array<T, N> inline_;
  std::vector<T> heap_;
};

XLA_FFI_Error* fail(const XLA_FFI_Api* api, Code code, const std::string& message) noexcept {
  return abi::ffi_error(api, abi::ffi_code(code), message.c_str());
}

// Copies the scalar and string attributes of the call (arrays and dictionaries are skipped).
std::vector<CallbackAttribute> read_attributes(const XLA_FFI_Attrs& attrs) {
  std::vector<CallbackAttribute> out;
  if (attrs.size <= 0 || !attrs.types || !attrs.names || !attrs.attrs) return out;
  for (int64_t i = 0; i < attrs.size; ++i) {
    const XLA_FFI_ByteSpan* name = attrs.names[i];
    if (!name) continue;
    CallbackAttribute a;
    a.name.assign(name->ptr, name->len);
    void* v = attrs.attrs[i];
    if (attrs.types[i] == XLA_FFI_AttrType_STRING) {
      const auto* s = static_cast<const XLA_FFI_ByteSpan*>(v);
      a.value = std::string(s->ptr, s->len);
    } else if (attrs.types[i] == XLA_FFI_AttrType_SCALAR) {
      const auto* s = static_cast<const XLA_FFI_Scalar*>(v);
      switch (s->dtype) {
        case XLA_FFI_DataType_PRED: a.value = *static_cast<const bool*>(s->value); break;
        case XLA_FFI_DataType_S8: a.value = int64_t{*static_cast<const int8_t*>(s->value)}; break;
        case XLA_FFI_DataType_S16: a.value = int64_t{*static_cast<const int16_t*>(s->value)}; break;
        case XLA_FFI_DataType_S32: a.value = int64_t{*static_cast<const int32_t*>(s->value)}; break;
        case XLA_FFI_DataType_S64: a.value = *static_cast<const int64_t*>(s->value); break;
        case XLA_FFI_DataType_U8: a.value = int64_t{*static_cast<const uint8_t*>(s->value)}; break;
        case XLA_FFI_DataType_U16: a.value = int64_t{*static_cast<const uint16_t*>(s->value)}; break;
        case XLA_FFI_DataType_U32: a.value = int64_t{*static_cast<const uint32_t*>(s->value)}; break;
        case XLA_FFI_DataType_U64: a.value = static_cast<int64_t>(*static_cast<const uint64_t*>(s->value)); break;
        case XLA_FFI_DataType_F32: a.value = double{*static_cast<const float*>(s->value)}; break;
        case XLA_FFI_DataType_F64: a.value = *static_cast<const double*>(s->value); break;
        default: continue;
      }
    } else {
      continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string entry_name(const char* what, int64_t index, std::string_view callback) {
  return std::string(what) + " " + std::to_string(index) + " of host callback '" + std::string(callback) + "'";
}

}  // namespace

Status describe_frame_buffer(std::string_view callback, const char* what, int64_t index, int type, void* raw,
                             PbHostTensor& out) {
  if (type != XLA_FFI_ArgType_BUFFER || !raw) return invalid_argument(entry_name(what, index, callback) + " is not an array");
  const auto* b = static_cast<const XLA_FFI_Buffer*>(raw);
  const DType dtype = abi::dtype_from_ffi(b->dtype);
  if (dtype == DType::kInvalid)
    return invalid_argument(entry_name(what, index, callback) + " has XLA element type " + std::to_string(b->dtype) +
                            ", which plugboard does not pass to host functions");
  if (b->rank < 0 || b->rank > INT32_MAX || (b->rank > 0 && !b->dims))
    return invalid_argument(entry_name(what, index, callback) + " has no valid dimensions (rank " +
                            std::to_string(b->rank) + ")");
  const std::span<const int64_t> dims(b->dims, static_cast<size_t>(b->rank));
  Expected<size_t> bytes = byte_size(dtype, dims);
  if (!bytes) return make_error(bytes.error().code(), entry_name(what, index, callback) + ": " + bytes.error().message());
  if (*bytes > 0 && !b->data) return invalid_argument(entry_name(what, index, callback) + " has no data");
  out.dtype = b->dtype;
  out.rank = static_cast<int32_t>(b->rank);
  out.dims = b->dims;
  out.data = b->data;
  out.size_bytes = *bytes;
  return ok();
}

Status check_host_tensor(std::string_view callback, const char* what, size_t index, const PbHostTensor& t) {
  const auto i = static_cast<int64_t>(index);
  const DType dtype = abi::dtype_from_ffi(t.dtype);
  if (dtype == DType::kInvalid)
    return invalid_argument(entry_name(what, i, callback) + " has XLA element type " + std::to_string(t.dtype) +
                            ", which plugboard does not pass to host functions");
  if (t.rank < 0 || (t.rank > 0 && !t.dims))
    return invalid_argument(entry_name(what, i, callback) + " has no valid dimensions (rank " + std::to_string(t.rank) + ")");
  Expected<size_t> bytes = byte_size(dtype, {t.dims, static_cast<size_t>(t.rank)});
  if (!bytes) return make_error(bytes.error().code(), entry_name(what, i, callback) + ": " + bytes.error().message());
  if (*bytes != t.size_bytes)
    return invalid_argument(entry_name(what, i, callback) + " comes with " + std::to_string(t.size_bytes) + " bytes, but " +
                            shape_string(dtype, std::vector<int64_t>(t.dims, t.dims + t.rank)) + " takes " +
                            std::to_string(*bytes));
  if (*bytes > 0 && !t.data) return invalid_argument(entry_name(what, i, callback) + " has no data");
  return ok();
}

namespace {

bool is_token(int type, void* raw) {
  return type == XLA_FFI_ArgType_BUFFER && raw && static_cast<const XLA_FFI_Buffer*>(raw)->dtype == XLA_FFI_DataType_TOKEN;
}

// The arrays among a frame's operands or results; tokens (which order side effects in the program)
// are not passed to host functions. `index` in messages counts every entry, tokens included.
template <class Types>
Status collect(const TargetSlot& slot, const char* what, int64_t size, const Types* types, void* const* entries,
               SmallVector<PbHostTensor>& out) {
  size_t n = 0;
  for (int64_t i = 0; i < size; ++i) {
    if (is_token(types[i], entries[i])) continue;
    PB_RETURN_IF_ERROR(describe_frame_buffer(slot.name, what, i, types[i], entries[i], out[n]));
    ++n;
  }
  out.shrink(n);
  return ok();
}

size_t count_arrays(int64_t size, const XLA_FFI_RetType* types, void* const* entries) {
  size_t n = 0;
  for (int64_t i = 0; i < size; ++i) n += !is_token(types[i], entries[i]);
  return n;
}

TensorView view_of(const PbHostTensor& t) {
  return {abi::dtype_from_ffi(t.dtype), {t.dims, static_cast<size_t>(t.rank)},
          {static_cast<const std::byte*>(t.data), t.size_bytes}};
}

void write_error(char* error, size_t error_size, const std::string& message) {
  if (!error || error_size == 0) return;
  std::snprintf(error, error_size, "%s", message.c_str());
}

// --- The host side of a call, shared by the CPU path and the device bridges. ---

struct BlockingContext {
  const TargetSlot* slot;
  const HostCallbacks::Entry* entry;
  const XLA_FFI_CallFrame* frame;
};

Status call_blocking(const BlockingContext& c, std::span<const PbHostTensor> operands,
                     std::span<const PbHostTensor> results) {
  SmallVector<TensorView> in(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) in[i] = view_of(operands[i]);
  SmallVector<MutableTensorView> out(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const PbHostTensor& t = results[i];
    out[i] = {abi::dtype_from_ffi(t.dtype), {t.dims, static_cast<size_t>(t.rank)},
              {static_cast<std::byte*>(t.data), t.size_bytes}};
  }
  std::vector<CallbackAttribute> attributes;
  if (c.frame->attrs.size > 0) attributes = read_attributes(c.frame->attrs);
  BlockingCall call(c.slot->name, in.span(), out.span(), attributes);
  return c.entry->blocking(call);
}

int bridge_call(void* ctx, const PbHostTensor* operands, size_t num_operands, PbHostTensor* results,
                size_t num_results, char* error, size_t error_size) {
  const auto& c = *static_cast<const BlockingContext*>(ctx);
  try {
    Status st = ok();
    for (size_t i = 0; st && i < num_operands; ++i) st = check_host_tensor(c.slot->name, "operand", i, operands[i]);
    for (size_t i = 0; st && i < num_results; ++i) st = check_host_tensor(c.slot->name, "result", i, results[i]);
    if (st) st = call_blocking(c, {operands, num_operands}, {results, num_results});
    if (st) return 0;
    write_error(error, error_size, st.error().to_string());
  } catch (const std::exception& e) {
    write_error(error, error_size, std::string("threw ") + e.what());
  } catch (...) {
    write_error(error, error_size, "threw an exception that is not a std::exception");
  }
  return 1;
}

struct PendingOrdered {
  std::shared_ptr<ExecutionState> state;
  const HostCallbacks::Entry* entry;
  OrderedCall call;  // name, execution, sequence and attributes filled; operands filled on enqueue
};

// Copies the operands and queues the call. The operands are checked first: from a device bridge they
// come through a C interface, and a size that disagrees with the dims is refused before any copy.
Status enqueue_ordered(PendingOrdered& p, std::span<const PbHostTensor> operands) {
  for (size_t i = 0; i < operands.size(); ++i)
    PB_RETURN_IF_ERROR(check_host_tensor(p.call.name, "operand", i, operands[i]));
  p.call.operands.reserve(operands.size());
  for (const PbHostTensor& t : operands) {
    io::HostArray a;
    a.dtype = abi::dtype_from_ffi(t.dtype);
    a.dims.assign(t.dims, t.dims + t.rank);
    const auto* bytes = static_cast<const std::byte*>(t.data);
    a.data.assign(bytes, bytes + t.size_bytes);
    p.call.operands.push_back(std::move(a));
  }
  auto state = p.state;
  const HostCallbacks::Entry* entry = p.entry;
  OrderedDelivery& delivery = state->receiver->delivery();
  const uint64_t ticket = delivery.post([state, entry, call = std::move(p.call)]() mutable {
    trace::Scope span("ordered_callback", "callback");  // the host function, on the thread delivering it
    span.arg("target", call.name).arg("sequence", static_cast<int64_t>(call.sequence));
    try {
      Status st = entry->ordered(call);
      if (!st)
        state->record_ordered_error(std::move(st).error().annotate("ordered host callback '" + call.name + "' (call " +
                                                                   std::to_string(call.sequence) + ")"));
    } catch (const std::exception& e) {
      state->record_ordered_error(Error(Code::kInternal, "ordered host callback '" + call.name + "' threw " + e.what()));
    } catch (...) {
      state->record_ordered_error(Error(Code::kInternal, "ordered host callback '" + call.name + "' threw"));
    }
  });
  state->note_ticket(ticket);
  return ok();
}

// Called by a device bridge once the operands are in host memory, when the handler has long returned
// (CUDA: from the stream's host function). Nobody can hand a failure back to the plugin then, so it is
// recorded in the execution: its await() fails with it, and no ordered call is ever lost silently.
int bridge_enqueue(void* ctx, const PbHostTensor* operands, size_t num_operands, char* error, size_t error_size) {
  auto& p = *static_cast<PendingOrdered*>(ctx);
  const std::string name = p.call.name;
  const uint64_t sequence = p.call.sequence;
  std::optional<Error> failed;
  try {
    Status st = enqueue_ordered(p, {operands, num_operands});
    if (st) return 0;
    failed = std::move(st).error();
  } catch (const std::exception& e) {
    failed = Error(Code::kResourceExhausted, std::string("queuing failed: ") + e.what());
  } catch (...) {
    failed = Error(Code::kInternal, "queuing failed with an exception that is not a std::exception");
  }
  write_error(error, error_size, failed->to_string());
  try {
    p.state->record_ordered_error(std::move(*failed).annotate("ordered host callback '" + name + "' (call " +
                                                              std::to_string(sequence) + ") was not delivered"));
  } catch (...) {
    p.state->record_ordered_error(Error(Code::kResourceExhausted, "an ordered host callback was not delivered"));
  }
  return 1;
}

void bridge_release(void* ctx) { delete static_cast<PendingOrdered*>(ctx); }

// --- The handler. ---

// An ordered call: its operands copied and queued for the receiver's delivery (through the device
// bridge when they live on the device); the program goes on at once.
XLA_FFI_Error* dispatch_ordered(const TargetSlot* slot, ExecutionState* state, const HostCallbacks::Entry* entry,
                                XLA_FFI_CallFrame* frame) {
  const XLA_FFI_Api* api = frame->api;
  trace::Scope span("ordered_callback_queued", "callback");  // on the plugin's thread: copying and queueing
  span.arg("target", slot->name).arg("executable", state->name);
  if (const size_t arrays = count_arrays(frame->rets.size, frame->rets.types, frame->rets.rets); arrays > 0)
    return fail(api, Code::kInvalidArgument,
                "ordered host callback '" + slot->name + "' cannot return arrays (only a token); the program "
                "declares " + std::to_string(arrays) + " (make it a blocking callback)");
  auto pending = std::make_unique<PendingOrdered>();
  pending->state = state->shared_from_this();
  pending->entry = entry;
  pending->call.name = slot->name;
  pending->call.execution = state->id;
  pending->call.sequence = state->next_sequence.fetch_add(1);
  if (frame->attrs.size > 0) pending->call.attributes = read_attributes(frame->attrs);
  if (slot->bridge) {
    PbHostDispatch host{pending.release(), nullptr, &bridge_enqueue, &bridge_release};
    return slot->bridge->run_ordered(frame, &host);  // the bridge releases the context
  }
  SmallVector<PbHostTensor> operands(static_cast<size_t>(std::max<int64_t>(frame->args.size, 0)));
  if (Status st = collect(*slot, "operand", frame->args.size, frame->args.types, frame->args.args, operands); !st)
    return fail(api, st.error().code(), st.error().message());
  if (Status st = enqueue_ordered(*pending, operands.span()); !st)
    return fail(api, st.error().code(), st.error().to_string());
  return nullptr;
}

// A blocking call: the earlier ordered calls delivered first, then the host function on this (the
// plugin's) thread, writing the results.
XLA_FFI_Error* dispatch_blocking(const TargetSlot* slot, ExecutionState* state, const HostCallbacks::Entry* entry,
                                 XLA_FFI_CallFrame* frame) {
  const XLA_FFI_Api* api = frame->api;
  // On the plugin's thread: the time the program waits for the host side's answer.
  trace::Scope span("blocking_callback", "callback");
  span.arg("target", slot->name).arg("executable", state->name);
  state->blocking_calls.fetch_add(1, std::memory_order_relaxed);
  // The host sees one order across both kinds: the ordered calls this execution made before this
  // one are delivered first (run here if they are still queued: the program waits anyway).
  if (const uint64_t ticket = state->last_ticket.load(std::memory_order_acquire); ticket != 0)
    state->receiver->delivery().wait_for(ticket);
  BlockingContext context{slot, entry, frame};
  if (slot->bridge) {
    PbHostDispatch host{&context, &bridge_call, nullptr, nullptr};
    XLA_FFI_Error* e = slot->bridge->run_blocking(frame, &host);
    PB_HAPPENS_BEFORE(state);
    return e;
  }
  SmallVector<PbHostTensor> operands(static_cast<size_t>(std::max<int64_t>(frame->args.size, 0)));
  if (Status st = collect(*slot, "operand", frame->args.size, frame->args.types, frame->args.args, operands); !st)
    return fail(api, st.error().code(), st.error().message());
  SmallVector<PbHostTensor> results(static_cast<size_t>(std::max<int64_t>(frame->rets.size, 0)));
  if (Status st = collect(*slot, "result", frame->rets.size, frame->rets.types, frame->rets.rets, results); !st)
    return fail(api, st.error().code(), st.error().message());
  Status st = call_blocking(context, operands.span(), results.span());
  PB_HAPPENS_BEFORE(state);
  if (!st) {
    Error e = std::move(st).error();
    return fail(api, e.code(), "host callback '" + slot->name + "' failed: " + e.to_string());
  }
  return nullptr;
}

// The handler: finds the execution's receiver and the function bound to this slot's target.
XLA_FFI_Error* dispatch(size_t index, XLA_FFI_CallFrame* frame) noexcept {
  if (!frame) return nullptr;
  if (abi::ffi_answer_metadata(frame)) return nullptr;
  const XLA_FFI_Api* api = frame->api;
  const TargetSlot* slot = g_slots[index].load(std::memory_order_acquire);
  if (!slot) return fail(api, Code::kInternal, "plugboard host-callback handler " + std::to_string(index) + " is not bound");
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  try {
    const auto* context_slot = static_cast<const ContextSlot*>(abi::ffi_execution_user_data(frame, slot->type_id));
    ExecutionState* state = context_slot ? context_slot->state.load(std::memory_order_acquire) : nullptr;
    if (state) PB_HAPPENS_AFTER(state);  // published by the launching thread (execute.cpp)
    if (!state)
      return fail(api, Code::kFailedPrecondition,
                  "host callback '" + slot->name +
                      "' was called by an execution that carries no plugboard receiver: run the program through "
                      "plugboard's execute_with_callbacks (or `plugboard run`)");
    const HostCallbacks::Entry* entry = state->receiver->bound_entry(slot->name);
    if (!entry) {
      std::string bound;
      for (const auto& n : state->receiver->names()) bound += (bound.empty() ? "" : ", ") + n;
      return fail(api, Code::kNotFound,
                  "the program calls host callback '" + slot->name + "', which this execution's receiver does not bind" +
                      (bound.empty() ? std::string(" (it binds none)") : " (it binds: " + bound + ")"));
    }

    if (entry->kind == CallbackKind::kOrdered) return dispatch_ordered(slot, state, entry, frame);
    return dispatch_blocking(slot, state, entry, frame);
  } catch (const std::exception& e) {
    return fail(api, Code::kInternal, "host callback '" + slot->name + "' threw " + e.what());
  } catch (...) {
    return fail(api, Code::kInternal, "host callback '" + slot->name + "' threw an exception that is not a std::exception");
  }
}

template <size_t K>
XLA_FFI_Error* slot_handler(XLA_FFI_CallFrame* frame) {
  return dispatch(K, frame);
}

template <size_t... K>
constexpr std::array<XLA_FFI_Handler*, sizeof...(K)> make_handlers(std::index_sequence<K...>) {
  return {&slot_handler<K>...};
}

constexpr auto kHandlers = make_handlers(std::make_index_sequence<kMaxCallbackTargets>{});

}  // namespace

SlotBinding::SlotBinding(SlotBinding&& o) noexcept
    : index_(o.index_), kept_(o.kept_), owns_(std::exchange(o.owns_, false)) {}

SlotBinding::~SlotBinding() {
  if (!owns_ || kept_) return;
  std::lock_guard lock(g_bind_mutex);
  const TargetSlot* slot = g_slots[index_].exchange(nullptr, std::memory_order_acq_rel);
  if (slot) --g_bound;
  delete slot;
}

XLA_FFI_Handler* SlotBinding::handler() const { return kHandlers[index_]; }
void SlotBinding::keep() { kept_ = true; }

Expected<SlotBinding> bind_target_slot(std::unique_ptr<TargetSlot> slot) {
  std::lock_guard lock(g_bind_mutex);
  if (g_bound < kMaxCallbackTargets) {
    for (size_t index = 0; index < kMaxCallbackTargets; ++index) {
      if (g_slots[index].load(std::memory_order_relaxed)) continue;
      g_slots[index].store(slot.release(), std::memory_order_release);
      ++g_bound;
      return SlotBinding(index);
    }
  }
  return make_error(Code::kResourceExhausted, "cannot register host callback '" + slot->name + "' with " + slot->plugin +
                                                  ": all " + std::to_string(kMaxCallbackTargets) +
                                                  " callback targets of this process are in use");
}

size_t bound_target_slots() {
  std::lock_guard lock(g_bind_mutex);
  return g_bound;
}

}  // namespace plugboard::internal
