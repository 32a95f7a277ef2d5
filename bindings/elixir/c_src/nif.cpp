// The NIF library of the Elixir module Plugboard.Native: its functions, the scheduler each runs on,
// and loading. Short calls run on normal schedulers (well under a millisecond); selection and plugin
// loading on dirty I/O schedulers; a copy of a large binary on a dirty CPU scheduler. Compilation and
// executions run on plugboard's own threads and answer by message.
#include <erl_nif.h>

#include "nif_functions.h"
#include "resources.h"

namespace plugboard::nif {
namespace {

int load(ErlNifEnv* env, void**, ERL_NIF_TERM) { return open_resource_types(env) ? 0 : 1; }

// Native threads of this library outlive any code upgrade: refuse one (the VM keeps the old code).
int upgrade(ErlNifEnv*, void**, void**, ERL_NIF_TERM) { return 1; }

ErlNifFunc functions[] = {
    {"version", 0, nif_version, 0},
    {"discover", 1, nif_discover, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"boot", 1, nif_boot, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"open", 2, nif_open, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"client_info", 1, nif_client_info, 0},
    {"client_close", 1, nif_client_close, 0},
    {"resource_counts", 0, nif_resource_counts, 0},
    {"compile", 6, nif_compile, 0},
    {"buffer_from_binary", 5, nif_buffer_from_binary, 0},
    {"buffer_from_binary_dirty", 5, nif_buffer_from_binary, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"buffer_to_binary", 3, nif_buffer_to_binary, 0},
    {"buffer_valid", 1, nif_buffer_valid, 0},
    {"execute", 8, nif_execute, 0},
    {"measure_execute", 3, nif_measure_execute, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"reply", 2, nif_reply, 0},
    {"fail_call", 2, nif_fail_call, 0},
};

}  // namespace
}  // namespace plugboard::nif

ERL_NIF_INIT(Elixir.Plugboard.Native, plugboard::nif::functions, plugboard::nif::load, nullptr,
             plugboard::nif::upgrade, nullptr)
