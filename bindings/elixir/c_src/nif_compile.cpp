// compile/4: starts a compilation on a pool thread (work_pool.h) and returns; the outcome arrives as
// {:plugboard_compiled, ref, {:ok, %{resource, name, parameters, results, callbacks}} | {:error, e}}.
// The program's host-callback names are declared on the client first (that may run the plugin's
// host-callback self-test, itself a compilation).
#include <memory>

#include "callback_route.h"
#include "nif_functions.h"
#include "resources.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

ERL_NIF_TERM make_types(ErlNifEnv* env, const std::vector<api::ArrayType>& types) {
  std::vector<ERL_NIF_TERM> items;
  for (const auto& t : types) items.push_back(enif_make_tuple2(env, make_dtype(env, t.dtype), make_shape(env, t.dims)));
  return make_list(env, items);
}

ERL_NIF_TERM make_executable_term(ErlNifEnv* env, std::shared_ptr<const api::Client> client, api::Executable exe) {
  std::vector<ERL_NIF_TERM> callbacks;
  for (const auto& name : exe.host_callbacks_needed()) callbacks.push_back(make_string(env, name));
  ERL_NIF_TERM parameters = exe.parameters_known() ? make_types(env, exe.parameters()) : make_nil(env);
  ERL_NIF_TERM results = make_types(env, exe.results());
  ERL_NIF_TERM name = make_string(env, exe.name());
  const api::CompileReport& report = exe.compile_report();
  std::vector<ERL_NIF_TERM> notes;
  for (const std::string& n : report.notes) notes.push_back(make_string(env, n));
  ERL_NIF_TERM source = atom(env, report.source_id());
  ERL_NIF_TERM compile_ms = enif_make_double(env, report.ms);
  ERL_NIF_TERM resource = make_resource<ExecutableResource>(env, ExecutableResource{std::move(client), std::move(exe)});
  return make_struct(env, "Elixir.Plugboard.Executable",
                     {{"resource", resource}, {"name", name}, {"parameters", parameters}, {"results", results},
                      {"callbacks", make_list(env, callbacks)}, {"source", source}, {"compile_ms", compile_ms},
                      {"notes", make_list(env, notes)}});
}

struct CompileJob {
  CompileJob(std::shared_ptr<const api::Client> c, api::Program p, ErlNifPid to)
      : client(std::move(c)), program(std::move(p)), pid(to) {}
  std::shared_ptr<const api::Client> client;
  api::Program program;
  api::CompileOptions options;
  std::vector<std::string> callbacks;
  ErlNifPid pid;
  OwnedEnv env;
  ERL_NIF_TERM ref = 0;

  void run() {
    Expected<api::Executable> exe = [&]() -> Expected<api::Executable> {
      if (!callbacks.empty()) {
        PB_ASSIGN_OR_RETURN(api::HostCallbacks receiver, declaration_receiver(callbacks));
        PB_RETURN_IF_ERROR(client->declare_callbacks(receiver));
      }
      return client->compile(program, options);
    }();
    ErlNifEnv* e = env.get();
    ERL_NIF_TERM outcome = exe ? make_ok(e, make_executable_term(e, client, std::move(*exe))) : make_error(e, exe.error());
    send_from_thread(pid, env, enif_make_tuple3(e, atom(e, "plugboard_compiled"), ref, outcome));
  }
};

}  // namespace

// compile(client, program :: binary, name :: string, options :: map, pid, ref)
// options: %{callbacks: [string], xla_options: [string], plugin_defaults: bool, portable: bool,
//           compile_cache: bool}
PB_NIF(nif_compile) {
  (void)argc;
  return guarded(env, "compiling", [&] {
    auto client = get_client(env, argv[0]);
    if (!client) return make_error(env, client.error());
    auto bytes = get_binary(env, argv[1], "program");
    if (!bytes) return make_error(env, bytes.error());
    auto name = get_string(env, argv[2], "program name");
    if (!name) return make_error(env, name.error());
    if (!enif_is_map(env, argv[3])) return make_error(env, Code::kInvalidArgument, "compile options must be a map");
    auto pid = get_pid(env, argv[4], "pid");
    if (!pid) return make_error(env, pid.error());

    auto program = api::Program::from_bytes(std::string(reinterpret_cast<const char*>(bytes->data), bytes->size), *name);
    if (!program) return make_error(env, program.error());
    auto job = std::make_shared<CompileJob>(*client, std::move(*program), *pid);
    if (auto v = map_get(env, argv[3], "callbacks")) {
      auto names = get_string_list(env, *v, "callbacks");
      if (!names) return make_error(env, names.error());
      job->callbacks = std::move(*names);
    }
    if (auto v = map_get(env, argv[3], "xla_options")) {
      auto options = get_string_list(env, *v, "xla_options");
      if (!options) return make_error(env, options.error());
      job->options.xla_options = std::move(*options);
    }
    if (auto v = map_get(env, argv[3], "plugin_defaults")) {
      auto b = get_bool(env, *v, "plugin_defaults");
      if (!b) return make_error(env, b.error());
      job->options.plugin_defaults = *b;
    }
    if (auto v = map_get(env, argv[3], "portable")) {
      auto b = get_bool(env, *v, "portable");
      if (!b) return make_error(env, b.error());
      job->options.portable = *b;
    }
    if (auto v = map_get(env, argv[3], "compile_cache")) {
      auto b = get_bool(env, *v, "compile_cache");
      if (!b) return make_error(env, b.error());
      job->options.compile_cache = *b;
    }
    job->ref = enif_make_copy(job->env.get(), argv[5]);
    if (!run_off_scheduler([job] { job->run(); }))
      return make_error(env, Code::kResourceExhausted, "no thread to compile " + *name + " on");
    return atom(env, "ok");
  });
}

}  // namespace plugboard::nif
