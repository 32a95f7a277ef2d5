// Buffers from and to binaries. buffer_from_binary/6 adopts a large (reference-counted) binary as
// immutable host memory: zero-copy where the platform allows it (CPU, 64-byte aligned), else the
// plugin copies it; the binary stays alive until the plugin lets go, and the buffer is never
// donatable, however it was made. Small binaries, and any binary with copy: true, are copied (and
// donatable). buffer_to_binary/3 starts the device→host copy into a fresh binary and returns
// {:started, gate}; the binary arrives as {:plugboard_binary, ref, {:ok, binary} | {:error, e}}.
// Copies over kDirtyCopyBytes run on a dirty scheduler. buffer_free/1 lets go of the device memory.
// buffer_device_pointer/1 gives a buffer's device address (on a dirty CPU scheduler: the plugin may
// wait for the contents first); buffer_from_pointer/5 views device memory at an address without a
// copy or any ownership (never donatable).
#include <cstring>
#include <limits>
#include <memory>

#include "callback_route.h"
#include "nif_functions.h"
#include "reply_gate.h"
#include "resources.h"

namespace plugboard::nif {

ERL_NIF_TERM make_buffer_term(ErlNifEnv* env, api::Buffer buffer, std::shared_ptr<const api::Client> client, BufferOrigin origin) {
  ERL_NIF_TERM dtype = make_dtype(env, buffer.dtype());
  ERL_NIF_TERM shape = make_shape(env, buffer.dims());
  ERL_NIF_TERM device = enif_make_int(env, buffer.device());
  ERL_NIF_TERM resource =
      make_resource<BufferResource>(env, std::make_shared<api::Buffer>(std::move(buffer)), std::move(client), origin);
  return make_struct(env, "Elixir.Plugboard.Buffer",
                     {{"resource", resource}, {"dtype", dtype}, {"shape", shape}, {"device", device}});
}

namespace {
// Binaries above this size are reference-counted (off-heap) and can be shared rather than copied.
constexpr size_t kOnHeapBinaryLimit = 64;

// A copy of the binary term in an environment of its own: the same bytes, kept alive.
struct KeptBinary {
  OwnedEnv env;
  ErlNifBinary bin{};
};
}  // namespace

// buffer_from_binary(client, binary, dtype, shape, device, copy?)
PB_NIF(nif_buffer_from_binary) {
  return guarded(env, "making a buffer", [&] {
    auto client = get_client(env, argv[0]);
    if (!client) return make_error(env, client.error());
    auto bin = get_binary(env, argv[1], "data");
    if (!bin) return make_error(env, bin.error());
    auto dtype = get_dtype(env, argv[2], "dtype");
    if (!dtype) return make_error(env, dtype.error());
    auto dims = get_shape(env, argv[3], "shape");
    if (!dims) return make_error(env, dims.error());
    auto device = get_int_in(env, argv[4], "device", 0, std::numeric_limits<int>::max());
    if (!device) return make_error(env, device.error());
    auto copy = get_bool(env, argv[5], "copy");
    if (!copy) return make_error(env, copy.error());
    auto needed = byte_size(*dtype, *dims);
    if (!needed) return make_error(env, needed.error());
    if (*needed != bin->size)
      return make_error(env, Code::kInvalidArgument,
                        "data is " + std::to_string(bin->size) + " bytes; " + shape_string(*dtype, *dims) + " needs " +
                            std::to_string(*needed));
    if (on_normal_scheduler() && bin->size > kDirtyCopyBytes)
      return enif_schedule_nif(env, "buffer_from_binary", ERL_NIF_DIRTY_JOB_CPU_BOUND, nif_buffer_from_binary, argc, argv);
    if (*dtype == DType::kBool)
      if (Status s = check_bool_bytes({bin->data, bin->size}, "data"); !s) return make_error(env, s.error());
    const bool adopt = !*copy && bin->size > kOnHeapBinaryLimit;
    Expected<api::Buffer> buffer = [&]() -> Expected<api::Buffer> {
      if (!adopt)
        return (*client)->copy_to_device(std::as_bytes(std::span(bin->data, bin->size)), *dtype, *dims,
                                         static_cast<int>(*device));
      auto kept = std::make_shared<KeptBinary>();
      if (!kept->env || !enif_inspect_binary(kept->env.get(), enif_make_copy(kept->env.get(), argv[1]), &kept->bin))
        return make_error(Code::kResourceExhausted, "could not keep the binary");
      auto bytes = std::as_bytes(std::span(kept->bin.data, kept->bin.size));
      return (*client)->adopt(bytes, std::move(kept), api::HostMemory::kImmutable, *dtype, *dims, static_cast<int>(*device));
    }();
    if (!buffer) return make_error(env, buffer.error());
    return make_ok(env, make_buffer_term(env, std::move(*buffer), *client, adopt ? BufferOrigin::kBinaryView : BufferOrigin::kOwned));
  });
}

namespace {
struct ReadJob {
  std::shared_ptr<api::Buffer> buffer;  // kept until the copy is done
  ErlNifBinary bin{};
  bool owns_bin = false;
  std::shared_ptr<ReplyGate> gate;
  ~ReadJob() {
    if (owns_bin) enif_release_binary(&bin);
  }
  // The copy is over: the buffer is let go before the caller hears of it, so a caller that donates the
  // buffer as soon as its read returns does not find it still held here ("in use").
  void finish(Status status) noexcept {
    buffer.reset();
    try {
      send(std::move(status));
    } catch (...) {
      gate->send_failure("plugboard_binary", "reading a buffer");
    }
  }
  void send(Status status) {
    OwnedEnv msg;
    ErlNifEnv* e = msg.get();
    ERL_NIF_TERM outcome;
    if (status) {
      outcome = make_ok(e, enif_make_binary(e, &bin));  // the term owns the bytes now
      owns_bin = false;
    } else {
      outcome = make_error(e, status.error());
    }
    gate->send("plugboard_binary", msg, outcome);
  }
};
}  // namespace

// buffer_to_binary(buffer, pid, ref) -> {:started, gate} | {:error, e}
PB_NIF(nif_buffer_to_binary) {
  return guarded(env, "reading a buffer", [&] {
    auto* b = get_resource<BufferResource>(env, argv[0]);
    if (!b) return make_error(env, Code::kInvalidArgument, "not a plugboard buffer");
    auto pid = get_pid(env, argv[1], "pid");
    if (!pid) return make_error(env, pid.error());
    auto buffer = b->use("reading");
    if (!buffer) return make_error(env, buffer.error());
    // A plugin may copy a ready buffer inside the call (XLA's CPU client does).
    if (on_normal_scheduler() && (*buffer)->byte_size() > kDirtyCopyBytes)
      return enif_schedule_nif(env, "buffer_to_binary", ERL_NIF_DIRTY_JOB_CPU_BOUND, nif_buffer_to_binary, argc, argv);
    auto job = std::make_shared<ReadJob>();
    job->buffer = std::move(*buffer);
    if (!enif_alloc_binary(job->buffer->byte_size(), &job->bin))
      return make_error(env, Code::kResourceExhausted, "no memory for a " + std::to_string(job->buffer->byte_size()) + "-byte binary");
    job->owns_bin = true;
    job->gate = std::make_shared<ReplyGate>(*pid, argv[2]);
    ERL_NIF_TERM gate = make_resource<GateResource>(env, job->gate);
    auto dst = std::as_writable_bytes(std::span(job->bin.data, job->bin.size));
    Status started = job->buffer->to_host_async(dst, [job](Status s) { job->finish(std::move(s)); });
    if (!started) return make_error(env, started.error());
    return enif_make_tuple2(env, atom(env, "started"), gate);
  });
}

// buffer_valid(buffer): false once donated or freed
PB_NIF(nif_buffer_valid) {
  (void)argc;
  auto* b = get_resource<BufferResource>(env, argv[0]);
  if (!b) return enif_make_badarg(env);
  auto buffer = b->get();
  return atom(env, buffer && buffer->valid() ? "true" : "false");
}

// buffer_donatable(buffer): whether run's donate: could take it at the time of the call: it owns its
// memory (not a view of an Erlang binary or of an address), is neither donated nor freed, and nothing
// else uses it (a read, an execution still starting: take_arguments' test, under the same lock; the
// shared_ptr is not copied, which would make it "in use" to a donation on another scheduler)
PB_NIF(nif_buffer_donatable) {
  (void)argc;
  auto* b = get_resource<BufferResource>(env, argv[0]);
  if (!b) return enif_make_badarg(env);
  if (!b->donatable()) return atom(env, "false");
  std::lock_guard lock(b->mutex);
  return atom(env, b->buffer && b->buffer.use_count() == 1 && b->buffer->valid() ? "true" : "false");
}

// buffer_free(buffer): :ok (also when freed already), or {:error, e} for a donated one
PB_NIF(nif_buffer_free) {
  (void)argc;
  return guarded(env, "freeing a buffer", [&] {
    auto* b = get_resource<BufferResource>(env, argv[0]);
    if (!b) return make_error(env, Code::kInvalidArgument, "not a plugboard buffer");
    return make_status(env, b->free());
  });
}

// buffer_device_pointer(buffer) -> {:ok, address} | {:error, e} (dirty CPU)
PB_NIF(nif_buffer_device_pointer) {
  (void)argc;
  return guarded(env, "reading a buffer's device address", [&] {
    auto* b = get_resource<BufferResource>(env, argv[0]);
    if (!b) return make_error(env, Code::kInvalidArgument, "not a plugboard buffer");
    auto buffer = b->use("reading the device address");
    if (!buffer) return make_error(env, buffer.error());
    auto address = (*buffer)->device_pointer();
    if (!address) return make_error(env, address.error());
    return make_ok(env, enif_make_uint64(env, *address));
  });
}

// buffer_from_pointer(client, address, dtype, shape, device, size) -> {:ok, %Plugboard.Buffer{}} | {:error, e}
// `size`: nil, or the bytes the memory at `address` holds (an Nx.Pointer's data_size): a shape that
// needs more is refused rather than read past the memory's end.
PB_NIF(nif_buffer_from_pointer) {
  (void)argc;
  return guarded(env, "making a buffer from a device address", [&] {
    auto client = get_client(env, argv[0]);
    if (!client) return make_error(env, client.error());
    auto address = get_uint64(env, argv[1], "address");
    if (!address) return make_error(env, address.error());
    auto dtype = get_dtype(env, argv[2], "dtype");
    if (!dtype) return make_error(env, dtype.error());
    auto dims = get_shape(env, argv[3], "shape");
    if (!dims) return make_error(env, dims.error());
    auto device = get_int_in(env, argv[4], "device", 0, std::numeric_limits<int>::max());
    if (!device) return make_error(env, device.error());
    if (!is_nil(env, argv[5])) {
      auto size = get_uint64(env, argv[5], "size");
      if (!size) return make_error(env, size.error());
      auto needed = byte_size(*dtype, *dims);
      if (!needed) return make_error(env, needed.error());
      if (*needed > *size)
        return make_error(env, Code::kInvalidArgument,
                          "shape " + shape_string(*dtype, *dims) + " needs " + std::to_string(*needed) +
                              " bytes, more than the " + std::to_string(*size) + " bytes at the address (size; an Nx.Pointer's data_size)");
    }
    if constexpr (sizeof(uintptr_t) < sizeof(uint64_t)) {
      if (*address > std::numeric_limits<uintptr_t>::max())
        return make_error(env, Code::kInvalidArgument, "address is out of range for this machine's pointers");
    }
    auto view = (*client)->view_of_device_memory(static_cast<uintptr_t>(*address), *dtype, *dims, static_cast<int>(*device));
    if (!view) return make_error(env, view.error());
    return make_ok(env, make_buffer_term(env, std::move(*view), *client, BufferOrigin::kPointerView));
  });
}

}  // namespace plugboard::nif
