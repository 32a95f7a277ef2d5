// Every NIF the module Plugboard.Native exports (nif.cpp lists them with their arities and the
// scheduler each runs on), and the guard each body runs under: no C++ exception reaches the VM.
#pragma once

#include <erl_nif.h>

#include <exception>
#include <new>

#include "plugboard/plugboard.h"
#include "resources.h"
#include "terms.h"

namespace plugboard::nif {

template <class Body>
ERL_NIF_TERM guarded(ErlNifEnv* env, const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_error(env, Code::kResourceExhausted, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return make_error(env, Code::kInternal, std::string(what) + ": " + e.what());
  } catch (...) {
    return make_error(env, Code::kInternal, std::string(what) + ": unknown exception");
  }
}

#define PB_NIF(name) ERL_NIF_TERM name(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[])

// nif_selection.cpp
PB_NIF(nif_version);
PB_NIF(nif_discover);
PB_NIF(nif_boot);
PB_NIF(nif_open);
PB_NIF(nif_client_info);
PB_NIF(nif_client_close);
PB_NIF(nif_client_id);
PB_NIF(nif_client_notify_when_dropped);
PB_NIF(nif_client_declare_lapack);
PB_NIF(nif_resource_counts);
PB_NIF(nif_await_teardowns);
// nif_compile.cpp
PB_NIF(nif_compile);
// nif_buffers.cpp
PB_NIF(nif_buffer_from_binary);
PB_NIF(nif_buffer_to_binary);
PB_NIF(nif_buffer_valid);
PB_NIF(nif_buffer_donatable);
PB_NIF(nif_buffer_free);
PB_NIF(nif_buffer_device_pointer);
PB_NIF(nif_buffer_from_pointer);
// nif_execute.cpp
PB_NIF(nif_execute);
PB_NIF(nif_execute_partitioned);
PB_NIF(nif_cancel);
PB_NIF(nif_cancelled);
PB_NIF(nif_measure_execute);
PB_NIF(nif_reply);
PB_NIF(nif_fail_call);
// run_counts.cpp
PB_NIF(nif_run_counts);
// nif_key_value.cpp
PB_NIF(nif_kv_store_new);
PB_NIF(nif_kv_reply);
PB_NIF(nif_kv_call);
PB_NIF(nif_open_distributed);
// nif_trace.cpp
PB_NIF(nif_trace_start);
PB_NIF(nif_trace_stop);
PB_NIF(nif_trace_spans);
PB_NIF(nif_trace_now);
PB_NIF(nif_trace_record);

// nif_trace.cpp's resource type (a stopped trace), opened at load and upgrade.
bool open_trace_resource_type(ErlNifEnv* env, ErlNifResourceFlags flags);

// nif_selection.cpp's readers and makers, shared with nif_key_value.cpp: a client term that owns
// `client`, and create options as [{name, value}].
ERL_NIF_TERM make_client_term(ErlNifEnv* env, std::shared_ptr<const api::Client> client);
Expected<std::vector<api::CreateOption>> get_create_options(ErlNifEnv* env, ERL_NIF_TERM list);

// A %Plugboard.Buffer{} for a buffer the term will own; `client` is the guarded client it was made on
// (resources.h), `origin` says whether its memory is its own.
ERL_NIF_TERM make_buffer_term(ErlNifEnv* env, api::Buffer buffer, std::shared_ptr<const api::Client> client,
                              BufferOrigin origin = BufferOrigin::kOwned);

}  // namespace plugboard::nif
