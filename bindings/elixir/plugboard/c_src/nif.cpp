// The NIF library of the Elixir module Plugboard.Native: its functions, the scheduler each runs on,
// and loading. Calls on normal schedulers return well under a millisecond: whatever could take
// longer goes elsewhere. Selection and plugin loading run on dirty I/O schedulers; copies of more
// than a MiB (buffers from and to binaries, host-callback answers) reschedule themselves onto a dirty
// CPU scheduler, as does reading a buffer's device address (the plugin may wait for the contents
// first), as does notify_when_dropped/3 (it copies its message, of any size); compilation,
// executions that may run long, and the teardown of clients, executables and buffers (those the
// garbage collector drops, batched: resources.h) run on plugboard's own threads (work_pool.h).
#include <erl_nif.h>

#include <cstring>
#include <cstdint>

#include "host_memory.h"
#include "nif_functions.h"
#include "resources.h"

namespace plugboard::nif {
namespace {

// What the library's resource objects look like. A new library takes over the objects an old one made
// only when they are laid out alike: raise this whenever a resource struct (resources.h) changes.
// 3: ClientResource's id and watchers, BufferResource's origin; the identity carries the client-id
// counter. 4: the identity carries VmShared (ids, live counts, teardowns) instead. 5: VmShared counts
// buffer destroys and message copies on schedulers (no destructor time).
constexpr int kResourceLayout = 5;
struct LibraryIdentity {
  const char* name;
  int resource_layout;
  VmShared* shared;  // the VM's: the first library's, passed on at each upgrade
};
LibraryIdentity identity{"plugboard_nif", kResourceLayout, nullptr};

bool same_layout(void* old_priv) {
  auto* old = static_cast<const LibraryIdentity*>(old_priv);
  return old && std::strcmp(old->name, identity.name) == 0 && old->resource_layout == kResourceLayout;
}

int load(ErlNifEnv* env, void** priv, ERL_NIF_TERM) {
  keep_large_blocks_in_the_heap();
  identity.shared = vm_shared_in_use();
  *priv = &identity;
  return open_resource_types(env, ERL_NIF_RT_CREATE) && open_trace_resource_type(env, ERL_NIF_RT_CREATE) ? 0 : 1;
}

// A hot upgrade of Plugboard.Native: the new library takes over the resource types, so the objects the
// old one made keep working; refused (the VM keeps the old code) when the old library's objects are
// laid out otherwise (its identity says so; one from before identities has none). The library is
// linked -z nodelete: its threads never outlive their code.
int upgrade(ErlNifEnv* env, void** priv, void** old_priv, ERL_NIF_TERM) {
  if (!old_priv || !same_layout(*old_priv)) return 1;
  // Ids, counts and teardowns go on in the old library's VmShared (it stays mapped: -z nodelete),
  // never starting over.
  use_vm_shared(static_cast<const LibraryIdentity*>(*old_priv)->shared);
  identity.shared = vm_shared_in_use();
  *priv = &identity;
  const auto flags = static_cast<ErlNifResourceFlags>(ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
  return open_resource_types(env, flags) && open_trace_resource_type(env, flags) ? 0 : 1;
}

ErlNifFunc functions[] = {
    {"version", 0, nif_version, 0},
    {"discover", 1, nif_discover, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"boot", 1, nif_boot, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"open", 2, nif_open, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"client_info", 1, nif_client_info, 0},
    {"client_close", 1, nif_client_close, 0},
    {"client_id", 1, nif_client_id, 0},
    {"client_notify_when_dropped", 3, nif_client_notify_when_dropped, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"client_declare_lapack", 1, nif_client_declare_lapack, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"resource_counts", 0, nif_resource_counts, 0},
    {"await_teardowns", 1, nif_await_teardowns, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"compile", 6, nif_compile, 0},
    {"buffer_from_binary", 6, nif_buffer_from_binary, 0},
    {"buffer_to_binary", 3, nif_buffer_to_binary, 0},
    {"buffer_valid", 1, nif_buffer_valid, 0},
    {"buffer_donatable", 1, nif_buffer_donatable, 0},
    {"buffer_free", 1, nif_buffer_free, 0},
    {"buffer_device_pointer", 1, nif_buffer_device_pointer, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"buffer_from_pointer", 6, nif_buffer_from_pointer, 0},
    {"execute", 8, nif_execute, 0},
    {"execute_partitioned", 5, nif_execute_partitioned, 0},
    {"cancel", 1, nif_cancel, 0},
    {"cancelled?", 1, nif_cancelled, 0},
    {"measure_execute", 3, nif_measure_execute, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"reply", 2, nif_reply, 0},
    {"kv_store_new", 2, nif_kv_store_new, 0},
    {"kv_reply", 3, nif_kv_reply, 0},
    {"kv_call", 5, nif_kv_call, 0},
    {"open_distributed", 6, nif_open_distributed, 0},
    {"fail_call", 2, nif_fail_call, 0},
    {"run_counts", 0, nif_run_counts, 0},
    // starts the plugins' own profilers too (CUPTI on CUDA): not on a normal scheduler
    {"trace_start", 2, nif_trace_start, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"trace_stop", 0, nif_trace_stop, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"trace_spans", 2, nif_trace_spans, 0},
    {"trace_now", 0, nif_trace_now, 0},
    {"trace_record", 6, nif_trace_record, 0},
};

}  // namespace
}  // namespace plugboard::nif

ERL_NIF_INIT(Elixir.Plugboard.Native, plugboard::nif::functions, plugboard::nif::load, nullptr,
             plugboard::nif::upgrade, nullptr)
