// compile/6: starts a compilation on a compile-pool thread (work_pool.h) and returns {:started, gate};
// the outcome arrives as
// {:plugboard_compiled, ref, {:ok, %Plugboard.Executable{}} | {:error, e}} (reply_gate.h: cancel/1
// stops it). The call itself only checks the options and keeps a reference to the program binary:
// reading the program (a copy and a scan of what may be 100 MB) happens on the compile thread. The
// program's host-callback names are declared on the client first (that may run the plugin's
// host-callback self-test, itself a compilation).
#include <limits>
#include <memory>

#include "callback_route.h"
#include "compile_policy.h"
#include "nif_functions.h"
#include "reply_gate.h"
#include "resources.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

ERL_NIF_TERM make_types(ErlNifEnv* env, const std::vector<api::ArrayType>& types) {
  std::vector<ERL_NIF_TERM> items;
  for (const auto& t : types) items.push_back(enif_make_tuple2(env, make_dtype(env, t.dtype), make_shape(env, t.dims)));
  return make_list(env, items);
}

ERL_NIF_TERM make_executable_term(ErlNifEnv* env, std::shared_ptr<const api::Client> client, api::Executable exe, bool inline_ok) {
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
  std::vector<ERL_NIF_TERM> devices;
  for (int d : exe.devices()) devices.push_back(enif_make_int(env, d));
  ERL_NIF_TERM resource = make_resource<ExecutableResource>(env, std::move(client), std::move(exe), inline_ok);
  return make_struct(env, "Elixir.Plugboard.Executable",
                     {{"resource", resource}, {"name", name}, {"parameters", parameters}, {"results", results},
                      {"callbacks", make_list(env, callbacks)}, {"source", source}, {"compile_ms", compile_ms},
                      {"notes", make_list(env, notes)}, {"launch", atom(env, inline_ok ? "inline" : "thread")},
                      {"devices", make_list(env, devices)}});
}

struct CompileJob {
  CompileJob(std::shared_ptr<const api::Client> c, std::shared_ptr<ReplyGate> g) : client(std::move(c)), gate(std::move(g)) {}
  std::shared_ptr<const api::Client> client;
  std::shared_ptr<ReplyGate> gate;
  OwnedEnv program_env;  // holds the program binary (a reference to it: no copy)
  ErlNifBinary program_bytes{};
  std::string name;
  api::CompileOptions options;
  std::vector<std::string> callbacks;

  void run() noexcept {
    try {
      compile_and_send();
    } catch (...) {
      gate->send_failure("plugboard_compiled", ("compiling " + name).c_str());
    }
  }

  void compile_and_send() {
    const std::string_view bytes(reinterpret_cast<const char*>(program_bytes.data), program_bytes.size);
    bool inline_ok = false;
    Expected<api::Executable> exe = [&]() -> Expected<api::Executable> {
      PB_ASSIGN_OR_RETURN(api::Program program, api::Program::from_bytes(std::string(bytes), name));
      if (!callbacks.empty()) {
        PB_ASSIGN_OR_RETURN(api::HostCallbacks receiver, declaration_receiver(callbacks));
        PB_RETURN_IF_ERROR(client->declare_callbacks(receiver));
      }
      PB_ASSIGN_OR_RETURN(api::Executable compiled, client->compile(program, options));
      inline_ok = may_launch_inline(bytes, compiled);
      return compiled;
    }();
    OwnedEnv msg;
    ErlNifEnv* e = msg.get();
    ERL_NIF_TERM outcome = exe ? make_ok(e, make_executable_term(e, client, std::move(*exe), inline_ok)) : make_error(e, exe.error());
    gate->send("plugboard_compiled", msg, outcome);
  }
};

}  // namespace

// compile(client, program :: binary, name :: string, options :: map, pid, ref) -> {:started, gate}
// options: %{callbacks: [string], xla_options: [string], plugin_defaults: bool, portable: bool,
//           compile_cache: bool, num_partitions: integer, partitioner: "none" | "gspmd" | "shardy",
//           devices: [integer]}
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

    auto job = std::make_shared<CompileJob>(*client, std::make_shared<ReplyGate>(*pid, argv[5]));
    job->name = std::move(*name);
    if (!job->program_env ||
        !enif_inspect_binary(job->program_env.get(), enif_make_copy(job->program_env.get(), argv[1]), &job->program_bytes))
      return make_error(env, Code::kResourceExhausted, "could not keep the program binary");
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
    if (auto v = map_get(env, argv[3], "num_partitions")) {
      auto n = get_int_in(env, *v, "num_partitions", 1, std::numeric_limits<int>::max());
      if (!n) return make_error(env, n.error());
      job->options.num_partitions = static_cast<int>(*n);
    }
    if (auto v = map_get(env, argv[3], "partitioner")) {
      auto name = get_string(env, *v, "partitioner");
      if (!name) return make_error(env, name.error());
      if (*name == "gspmd") job->options.partitioner = api::Partitioner::kGspmd;
      else if (*name == "shardy") job->options.partitioner = api::Partitioner::kShardy;
      else if (*name != "none")
        return make_error(env, Code::kInvalidArgument, "partitioner must be none, gspmd or shardy, got " + *name);
    }
    if (auto v = map_get(env, argv[3], "devices")) {
      auto list = get_int_list(env, *v, "devices");
      if (!list) return make_error(env, list.error());
      for (int64_t d : *list) {
        if (d < 0 || d > std::numeric_limits<int>::max())
          return make_error(env, Code::kInvalidArgument, "devices: " + std::to_string(d) + " is not a device index");
        job->options.devices.push_back(static_cast<int>(d));
      }
    }
    if (auto v = map_get(env, argv[3], "compile_cache")) {
      auto b = get_bool(env, *v, "compile_cache");
      if (!b) return make_error(env, b.error());
      job->options.compile_cache = *b;
    }
    ERL_NIF_TERM gate = make_resource<GateResource>(env, job->gate);
    if (!api::post_compile_work([job] { job->run(); }))
      return make_error(env, Code::kResourceExhausted, "no thread to compile " + job->name + " on");
    return enif_make_tuple2(env, atom(env, "started"), gate);
  });
}

}  // namespace plugboard::nif
