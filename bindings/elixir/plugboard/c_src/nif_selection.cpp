// Selection and clients: discover/1, boot/1 (dirty I/O: they read files, may probe devices, start
// child processes and load plugins), open/2 (dirty I/O), client_info/1, client_id/1 and
// client_notify_when_dropped/3.
#include <cmath>
#include <limits>

#include "nif_functions.h"
#include "report_terms.h"
#include "resources.h"

namespace plugboard::nif {
namespace {

// %{bundle:, target:, preference:, probes:, isolate:, use_environment:, policy_source:} (every key
// optional).
Expected<api::SelectionSettings> get_settings(ErlNifEnv* env, ERL_NIF_TERM map) {
  if (!enif_is_map(env, map)) return invalid_argument("the selection settings must be a map");
  api::SelectionSettings s;
  if (auto v = map_get(env, map, "bundle")) {
    if (!is_nil(env, *v)) {
      PB_ASSIGN_OR_RETURN(s.bundle, get_path(env, *v, "bundle"));
    }
  }
  if (auto v = map_get(env, map, "target")) {
    PB_ASSIGN_OR_RETURN(s.target, get_optional_string(env, *v, "target"));
  }
  if (auto v = map_get(env, map, "preference"); v && !is_nil(env, *v)) {
    PB_ASSIGN_OR_RETURN(s.preference, get_string_list(env, *v, "targets"));
  }
  if (auto v = map_get(env, map, "probes")) {
    PB_ASSIGN_OR_RETURN(s.probes, get_optional_bool(env, *v, "probes"));
  }
  if (auto v = map_get(env, map, "isolate")) {
    PB_ASSIGN_OR_RETURN(s.isolate, get_optional_bool(env, *v, "isolate"));
  }
  if (auto v = map_get(env, map, "policy_source")) {
    PB_ASSIGN_OR_RETURN(s.policy_source, get_optional_string(env, *v, "policy_source"));
  }
  if (auto v = map_get(env, map, "use_environment")) {
    PB_ASSIGN_OR_RETURN(s.use_environment, get_bool(env, *v, "use_environment"));
  }
  return s;
}

}  // namespace

ERL_NIF_TERM make_client_term(ErlNifEnv* env, std::shared_ptr<const api::Client> client) {
  return make_resource<ClientResource>(env, std::move(client));
}

Expected<std::vector<api::CreateOption>> get_create_options(ErlNifEnv* env, ERL_NIF_TERM list) {
  std::vector<api::CreateOption> out;
  ERL_NIF_TERM head, tail = list;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    int arity;
    const ERL_NIF_TERM* kv;
    if (!enif_get_tuple(env, head, &arity, &kv) || arity != 2)
      return invalid_argument("create options must be {name, value} pairs");
    PB_ASSIGN_OR_RETURN(std::string name, get_string(env, kv[0], "create option name"));
    api::CreateOption option{name, {}};
    const std::string what = "create option " + name;
    double d;
    if (enif_get_double(env, kv[1], &d)) {
      // PJRT takes float options as 32-bit floats.
      if (!(std::fabs(d) <= static_cast<double>(std::numeric_limits<float>::max())))
        return invalid_argument(what + " (" + std::to_string(d) + ") is out of range for a 32-bit float option");
      option.value = static_cast<float>(d);
    } else if (enif_is_number(env, kv[1])) {
      PB_ASSIGN_OR_RETURN(int64_t i, get_int_in(env, kv[1], what, std::numeric_limits<int64_t>::min(),
                                                 std::numeric_limits<int64_t>::max()));
      option.value = i;
    } else if (auto b = get_bool(env, kv[1], name)) option.value = *b;
    else if (enif_is_list(env, kv[1])) {
      PB_ASSIGN_OR_RETURN(auto ints, get_int_list(env, kv[1], what));
      option.value = std::move(ints);
    } else {
      PB_ASSIGN_OR_RETURN(std::string s, get_string(env, kv[1], what + " (an integer, float, boolean, list of integers or string)"));
      option.value = std::move(s);
    }
    out.push_back(std::move(option));
  }
  if (!enif_is_empty_list(env, tail)) return invalid_argument("create options must be a list of {name, value} pairs");
  return out;
}

PB_NIF(nif_version) {
  (void)argc;
  (void)argv;
  return make_string(env, api::version());
}

PB_NIF(nif_discover) {
  (void)argc;
  return guarded(env, "discovering targets", [&] {
    auto settings = get_settings(env, argv[0]);
    if (!settings) return make_error(env, settings.error());
    auto report = api::discover(*settings);
    if (!report) return make_error(env, report.error());
    return make_ok(env, make_report(env, *report));
  });
}

// {:ok, client | nil, report, :ok | {:error, e}} or {:error, e} for malformed settings.
PB_NIF(nif_boot) {
  (void)argc;
  return guarded(env, "booting", [&] {
    auto settings = get_settings(env, argv[0]);
    if (!settings) return make_error(env, settings.error());
    auto boot = api::boot(*settings);
    if (!boot) return make_error(env, boot.error());
    ERL_NIF_TERM client = boot->client ? make_client_term(env, boot->client) : make_nil(env);
    return enif_make_tuple4(env, atom(env, "ok"), client, make_report(env, boot->report), make_status(env, boot->status));
  });
}

PB_NIF(nif_open) {
  (void)argc;
  return guarded(env, "opening a plugin", [&] {
    auto path = get_path(env, argv[0], "plugin");
    if (!path) return make_error(env, path.error());
    auto options = get_create_options(env, argv[1]);
    if (!options) return make_error(env, options.error());
    auto client = api::Client::open(*path, *options);
    if (!client) return make_error(env, client.error());
    return make_ok(env, make_client_term(env, std::move(*client)));
  });
}

// %{platform:, platform_version:, plugin:, devices: [%{index:, id:, kind:, description:, memory:}]}
PB_NIF(nif_client_info) {
  (void)argc;
  return guarded(env, "reading a client", [&] {
    auto client = get_client(env, argv[0]);
    if (!client) return make_error(env, client.error());
    const api::Client& c = **client;
    std::vector<ERL_NIF_TERM> devices;
    for (const api::Device& d : c.devices()) {
      ERL_NIF_TERM memory = make_nil(env);
      if (d.memory) {
        memory = enif_make_new_map(env);
        enif_make_map_put(env, memory, atom(env, "bytes_in_use"), enif_make_int64(env, d.memory->bytes_in_use), &memory);
        if (d.memory->bytes_limit)
          enif_make_map_put(env, memory, atom(env, "bytes_limit"), enif_make_int64(env, *d.memory->bytes_limit), &memory);
      }
      ERL_NIF_TERM device = enif_make_new_map(env);
      enif_make_map_put(env, device, atom(env, "index"), enif_make_int(env, d.index), &device);
      enif_make_map_put(env, device, atom(env, "id"), enif_make_int(env, d.id), &device);
      enif_make_map_put(env, device, atom(env, "kind"), make_string(env, d.kind), &device);
      enif_make_map_put(env, device, atom(env, "description"), make_string(env, d.description), &device);
      enif_make_map_put(env, device, atom(env, "memory"), memory, &device);
      devices.push_back(device);
    }
    ERL_NIF_TERM info = enif_make_new_map(env);
    enif_make_map_put(env, info, atom(env, "platform"), make_string(env, c.platform()), &info);
    enif_make_map_put(env, info, atom(env, "platform_version"), make_string(env, c.platform_version()), &info);
    enif_make_map_put(env, info, atom(env, "plugin"), make_string(env, c.plugin_path().string()), &info);
    enif_make_map_put(env, info, atom(env, "devices"), make_list(env, devices), &info);
    return make_ok(env, info);
  });
}

// The client's teardown, when this was its last reference, runs on a launch-pool thread (guard_client).
PB_NIF(nif_client_close) {
  (void)argc;
  return guarded(env, "closing a client", [&] {
    auto* c = get_resource<ClientResource>(env, argv[0]);
    if (!c) return make_error(env, Code::kInvalidArgument, "not a plugboard client");
    c->close();
    return atom(env, "ok");
  });
}

// client_id(client) -> non_neg_integer: never given to another client of this VM
PB_NIF(nif_client_id) {
  (void)argc;
  auto* c = get_client_resource(env, argv[0]);
  if (!c) return enif_make_badarg(env);
  return enif_make_uint64(env, c->id);
}

// client_notify_when_dropped(client, pid, message) -> :ok: `pid` gets `message` once the garbage
// collector destroys the client resource (closing it is not its end: the term may still be used).
PB_NIF(nif_client_notify_when_dropped) {
  (void)argc;
  return guarded(env, "watching a client", [&] {
    auto* c = get_client_resource(env, argv[0]);
    if (!c) return make_error(env, Code::kInvalidArgument, "not a plugboard client");
    auto pid = get_pid(env, argv[1], "pid");
    if (!pid) return make_error(env, pid.error());
    return make_status(env, c->watch(*pid, argv[2]));
  });
}

// client_declare_lapack(client) -> :ok | {:error, ...}: plugboard's LAPACK kernels registered on the
// client's plugin (dirty: the first call opens the LAPACK library).
PB_NIF(nif_client_declare_lapack) {
  (void)argc;
  return guarded(env, "declaring LAPACK kernels", [&] {
    auto client = get_client(env, argv[0]);
    if (!client) return make_error(env, client.error());
    return make_status(env, (*client)->declare_lapack());
  });
}

// :ok once the teardowns handed to the NIF's threads have finished, :timeout after `ms` milliseconds
// (Plugboard.Application.stop/1: none may still run when the VM exits). Dirty I/O: it waits.
PB_NIF(nif_await_teardowns) {
  (void)argc;
  int64_t ms = 0;
  if (!enif_get_int64(env, argv[0], &ms) || ms < 0) return enif_make_badarg(env);
  return atom(env, await_teardowns(std::chrono::milliseconds(ms)) ? "ok" : "timeout");
}

// %{client: n, executable: n, buffer: n, call: n, ...}: live native objects, and what was done of
// their teardown on normal schedulers (buffer destroys, watchers' message copies)
PB_NIF(nif_resource_counts) {
  (void)argc;
  (void)argv;
  ERL_NIF_TERM map = enif_make_new_map(env);
  const std::pair<const char*, ResourceKind> kinds[] = {{"client", ResourceKind::kClient},
                                                        {"executable", ResourceKind::kExecutable},
                                                        {"buffer", ResourceKind::kBuffer},
                                                        {"call", ResourceKind::kCall},
                                                        {"gate", ResourceKind::kGate},
                                                        {"key_value_store", ResourceKind::kKeyValue}};
  for (const auto& [name, kind] : kinds) enif_make_map_put(env, map, atom(env, name), enif_make_int64(env, live_resources(kind)), &map);
  enif_make_map_put(env, map, atom(env, "buffer_destroys_on_schedulers"), enif_make_int64(env, buffer_destroys_on_schedulers()), &map);
  enif_make_map_put(env, map, atom(env, "message_copies_on_schedulers"), enif_make_int64(env, message_copies_on_schedulers()), &map);
  return map;
}

}  // namespace plugboard::nif
