// Buffers from and to binaries. buffer_from_binary/5 adopts a large (reference-counted) binary as
// immutable host memory: zero-copy where the platform allows it (CPU, 64-byte aligned), else the
// plugin copies it; the binary stays alive until the plugin lets go. Small binaries are copied.
// buffer_to_binary/3 starts the device→host copy into a fresh binary and returns; the binary
// arrives as {:plugboard_binary, ref, {:ok, binary} | {:error, e}}.
#include <cstring>
#include <memory>

#include "nif_functions.h"
#include "resources.h"

namespace plugboard::nif {

ERL_NIF_TERM make_buffer_term(ErlNifEnv* env, api::Buffer buffer) {
  ERL_NIF_TERM dtype = make_dtype(env, buffer.dtype());
  ERL_NIF_TERM shape = make_shape(env, buffer.dims());
  ERL_NIF_TERM device = enif_make_int(env, buffer.device());
  ERL_NIF_TERM resource = make_resource<BufferResource>(env, std::make_shared<api::Buffer>(std::move(buffer)));
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

// buffer_from_binary(client, binary, dtype, shape, device)
PB_NIF(nif_buffer_from_binary) {
  (void)argc;
  return guarded(env, "making a buffer", [&] {
    auto client = get_client(env, argv[0]);
    if (!client) return make_error(env, client.error());
    auto bin = get_binary(env, argv[1], "data");
    if (!bin) return make_error(env, bin.error());
    auto dtype = get_dtype(env, argv[2], "dtype");
    if (!dtype) return make_error(env, dtype.error());
    auto dims = get_shape(env, argv[3], "shape");
    if (!dims) return make_error(env, dims.error());
    auto device = get_int(env, argv[4], "device");
    if (!device) return make_error(env, device.error());
    auto needed = byte_size(*dtype, *dims);
    if (!needed) return make_error(env, needed.error());
    if (*needed != bin->size)
      return make_error(env, Code::kInvalidArgument,
                        "data is " + std::to_string(bin->size) + " bytes; " + shape_string(*dtype, *dims) + " needs " +
                            std::to_string(*needed));
    Expected<api::Buffer> buffer = [&]() -> Expected<api::Buffer> {
      if (bin->size <= kOnHeapBinaryLimit)
        return (*client)->copy_to_device(std::as_bytes(std::span(bin->data, bin->size)), *dtype, *dims,
                                         static_cast<int>(*device));
      auto kept = std::make_shared<KeptBinary>();
      if (!kept->env || !enif_inspect_binary(kept->env.get(), enif_make_copy(kept->env.get(), argv[1]), &kept->bin))
        return make_error(Code::kResourceExhausted, "could not keep the binary");
      auto bytes = std::as_bytes(std::span(kept->bin.data, kept->bin.size));
      return (*client)->adopt(bytes, std::move(kept), api::HostMemory::kImmutable, *dtype, *dims, static_cast<int>(*device));
    }();
    if (!buffer) return make_error(env, buffer.error());
    return make_ok(env, make_buffer_term(env, std::move(*buffer)));
  });
}

namespace {
struct ReadJob {
  std::shared_ptr<api::Buffer> buffer;  // kept until the copy is done
  ErlNifBinary bin{};
  bool owns_bin = false;
  ErlNifPid pid{};
  OwnedEnv env;
  ERL_NIF_TERM ref = 0;
  ~ReadJob() {
    if (owns_bin) enif_release_binary(&bin);
  }
  void finish(Status status) {
    ErlNifEnv* e = env.get();
    ERL_NIF_TERM outcome;
    if (status) {
      outcome = make_ok(e, enif_make_binary(e, &bin));  // the term owns the bytes now
      owns_bin = false;
    } else {
      outcome = make_error(e, status.error());
    }
    send_from_thread(pid, env, enif_make_tuple3(e, atom(e, "plugboard_binary"), ref, outcome));
  }
};
}  // namespace

// buffer_to_binary(buffer, pid, ref)
PB_NIF(nif_buffer_to_binary) {
  (void)argc;
  return guarded(env, "reading a buffer", [&] {
    auto* b = get_resource<BufferResource>(env, argv[0]);
    if (!b) return make_error(env, Code::kInvalidArgument, "not a plugboard buffer");
    auto pid = get_pid(env, argv[1], "pid");
    if (!pid) return make_error(env, pid.error());
    auto job = std::make_shared<ReadJob>();
    job->buffer = b->get();
    if (!job->buffer || !job->buffer->valid())
      return make_error(env, Code::kFailedPrecondition, "the buffer was donated to an execution and is gone");
    if (!enif_alloc_binary(job->buffer->byte_size(), &job->bin))
      return make_error(env, Code::kResourceExhausted, "no memory for a " + std::to_string(job->buffer->byte_size()) + "-byte binary");
    job->owns_bin = true;
    job->pid = *pid;
    job->ref = enif_make_copy(job->env.get(), argv[2]);
    auto dst = std::as_writable_bytes(std::span(job->bin.data, job->bin.size));
    Status started = job->buffer->to_host_async(dst, [job](Status s) { job->finish(std::move(s)); });
    if (!started) return make_error(env, started.error());
    return atom(env, "ok");
  });
}

// buffer_valid(buffer): false once donated
PB_NIF(nif_buffer_valid) {
  (void)argc;
  auto* b = get_resource<BufferResource>(env, argv[0]);
  if (!b) return enif_make_badarg(env);
  auto buffer = b->get();
  return atom(env, buffer && buffer->valid() ? "true" : "false");
}

}  // namespace plugboard::nif
