// execute/8 starts an execution and returns (a program with host callbacks starts on a pool thread,
// see below): the outcome arrives as
// {:plugboard_done, ref, {:ok, [%Plugboard.Buffer{}]} | {:error, e}} from the execution's completion
// (a delivery thread), after every ordered host call was sent. No scheduler is held while it runs.
// reply/2 and fail_call/2 answer a blocking host call (callback_route.h).
#include <algorithm>
#include <memory>

#include "callback_route.h"
#include "nif_functions.h"
#include "resources.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

ERL_NIF_TERM make_outputs(ErlNifEnv* env, std::vector<api::Buffer>& outputs);

// What an execution's completion needs: where to send, and the outputs (moved here before the
// completion is asked for, so that it never races with the move).
struct Completion {
  Completion(ErlNifPid to, ERL_NIF_TERM run_ref) : caller(to), ref(enif_make_copy(env.get(), run_ref)) {}
  OwnedEnv env;  // holds ref
  ErlNifPid caller{};
  ERL_NIF_TERM ref;
  std::vector<api::Buffer> outputs;

  void send(Status status) {
    OwnedEnv msg;
    ErlNifEnv* e = msg.get();
    ERL_NIF_TERM outcome;
    if (status) {
      outcome = make_outputs(e, outputs);
    } else {
      outcome = make_error(e, status.error());
    }
    outputs.clear();
    send_from_thread(caller, msg, enif_make_tuple3(e, atom(e, "plugboard_done"), enif_make_copy(e, ref), outcome));
  }
};

// The arguments of one execution: references to each buffer, the donated ones taken out of their
// resources (and put back if the execution does not start).
struct Arguments {
  std::vector<std::shared_ptr<api::Buffer>> buffers;
  std::vector<BufferResource*> donated_from;  // parallel to buffers: the resource a donated one left
  std::vector<api::Buffer*> pointers;
  Arguments() = default;
  Arguments(Arguments&&) = default;
  Arguments& operator=(Arguments&&) = default;

  void give_back() {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (donated_from[i] && buffers[i] && buffers[i]->valid()) {
        std::lock_guard lock(donated_from[i]->mutex);
        donated_from[i]->buffer = std::move(buffers[i]);
      }
  }
};

Expected<Arguments> take_arguments(ErlNifEnv* env, ERL_NIF_TERM list, const std::vector<int>& donate) {
  Arguments args;
  ERL_NIF_TERM head, tail = list;
  for (int i = 0; enif_get_list_cell(env, tail, &head, &tail); ++i) {
    auto* resource = get_resource<BufferResource>(env, enif_is_map(env, head) ? map_get(env, head, "resource").value_or(head) : head);
    if (!resource) {
      args.give_back();
      return invalid_argument("argument " + std::to_string(i) + " is not a plugboard buffer");
    }
    const bool donated = std::find(donate.begin(), donate.end(), i) != donate.end();
    std::shared_ptr<api::Buffer> buffer;
    {
      std::lock_guard lock(resource->mutex);
      if (donated && resource->buffer && resource->buffer.use_count() > 1) {
        args.give_back();
        return make_error(Code::kFailedPrecondition, "argument " + std::to_string(i) +
                                                         " is in use (being read, or an argument of another execution starting now): it cannot be donated");
      }
      buffer = donated ? std::move(resource->buffer) : resource->buffer;
    }
    if (!buffer || !buffer->valid()) {
      args.buffers.push_back(std::move(buffer));
      args.donated_from.push_back(donated ? resource : nullptr);
      args.give_back();
      return make_error(Code::kFailedPrecondition, "argument " + std::to_string(i) + " was donated to an earlier execution");
    }
    args.pointers.push_back(buffer.get());
    args.buffers.push_back(std::move(buffer));
    args.donated_from.push_back(donated ? resource : nullptr);
  }
  if (!enif_is_empty_list(env, tail)) {
    args.give_back();
    return invalid_argument("the arguments must be a list of buffers");
  }
  return args;
}

Expected<std::vector<CallRoute>> get_routes(ErlNifEnv* env, ERL_NIF_TERM list) {
  std::vector<CallRoute> routes;
  ERL_NIF_TERM head, tail = list;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    int arity;
    const ERL_NIF_TERM* t;
    if (!enif_get_tuple(env, head, &arity, &t) || arity != 3)
      return invalid_argument("a callback route must be {name, pid, ordered?}");
    PB_ASSIGN_OR_RETURN(std::string name, get_string(env, t[0], "callback name"));
    PB_ASSIGN_OR_RETURN(ErlNifPid pid, get_pid(env, t[1], "the process for callback " + name));
    PB_ASSIGN_OR_RETURN(bool ordered, get_bool(env, t[2], "ordered"));
    routes.push_back({std::move(name), pid, ordered});
  }
  return routes;
}

// Runs on the calling thread (a scheduler) or, when a blocking callback may wait, on a pool thread.
struct Launch {
  std::shared_ptr<const api::Client> client;  // the executable's
  api::Executable executable;
  Arguments args;
  api::ExecuteOptions options;
  std::shared_ptr<Completion> completion;

  Expected<api::Execution> begin() {
    Expected<api::Execution> execution = executable.execute(args.pointers, options);
    if (!execution) args.give_back();
    args.buffers.clear();  // donated buffers were consumed; the others stay with their resources
    return execution;
  }

  // The outcome arrives by message, from the execution's completion.
  Status start() {
    Expected<api::Execution> execution = begin();
    if (!execution) return std::unexpected(std::move(execution).error());
    return report_on_completion(*execution);
  }

  Status report_on_completion(api::Execution& execution) {
    completion->outputs = std::move(execution.outputs());
    auto completion_ref = completion;
    // Dropping the execution never waits; its completion still runs.
    return execution.on_complete([completion_ref](Status s) { completion_ref->send(std::move(s)); });
  }
};

ERL_NIF_TERM make_outputs(ErlNifEnv* env, std::vector<api::Buffer>& outputs) {
  std::vector<ERL_NIF_TERM> buffers;
  for (api::Buffer& b : outputs) buffers.push_back(make_buffer_term(env, std::move(b)));
  return make_ok(env, make_list(env, buffers));
}

}  // namespace

// execute(executable, args, donate, device, routes, blocking_limit_ms | nil, caller, ref)
PB_NIF(nif_execute) {
  (void)argc;
  return guarded(env, "starting an execution", [&] {
    auto* exe = get_resource<ExecutableResource>(env, argv[0]);
    if (!exe) return make_error(env, Code::kInvalidArgument, "not a plugboard executable");
    auto donate64 = get_int_list(env, argv[2], "donate");
    if (!donate64) return make_error(env, donate64.error());
    std::vector<int> donate(donate64->begin(), donate64->end());
    auto device = get_int(env, argv[3], "device");
    if (!device) return make_error(env, device.error());
    auto route_list = get_routes(env, argv[4]);
    if (!route_list) return make_error(env, route_list.error());
    std::optional<std::chrono::milliseconds> limit;
    if (!is_nil(env, argv[5])) {
      auto ms = get_int(env, argv[5], "callback_timeout");
      if (!ms) return make_error(env, ms.error());
      limit = std::chrono::milliseconds(*ms);
    }
    auto caller = get_pid(env, argv[6], "caller");
    if (!caller) return make_error(env, caller.error());

    // A program with host callbacks may make PJRT_LoadedExecutable_Execute wait: a blocking callback
    // run inline waits for an Elixir process, and XLA's CPU client runs the executions of programs
    // with side effects one after another, so that one started inline waits for the previous one (held
    // in its callbacks, whose answers need a scheduler). Those start off the schedulers.
    const bool may_wait = !route_list->empty();

    Launch here{exe->client, exe->executable, {}, {}, nullptr};
    here.options.device = static_cast<int>(*device);
    here.options.donate = std::move(donate);
    if (may_wait) {
      auto routes = std::make_shared<ExecutionRoutes>();
      routes->ref = enif_make_copy(routes->env.get(), argv[7]);
      routes->routes = std::move(*route_list);
      routes->blocking_limit = limit;
      auto receiver = make_receiver(std::move(routes));
      if (!receiver) return make_error(env, receiver.error());
      here.options.callbacks = std::move(*receiver);
    }
    auto args = take_arguments(env, argv[1], here.options.donate);
    if (!args) return make_error(env, args.error());
    here.args = std::move(*args);

    if (!may_wait) {
      Expected<api::Execution> execution = here.begin();
      if (!execution) return make_error(env, execution.error());
      // The plugin ran it inside execute() (small programs on CPU): the outputs go back at once,
      // without a message ({:done, outcome}).
      if (execution->finished()) {
        Status status = execution->await();
        return enif_make_tuple2(env, atom(env, "done"),
                                status ? make_outputs(env, execution->outputs()) : make_error(env, status.error()));
      }
      here.completion = std::make_shared<Completion>(*caller, argv[7]);
      return make_status(env, here.report_on_completion(*execution));
    }
    auto launch = std::make_shared<Launch>(std::move(here));
    launch->completion = std::make_shared<Completion>(*caller, argv[7]);
    bool queued = run_off_scheduler([launch] {
      if (Status s = launch->start(); !s) launch->completion->send(std::move(s));
    });
    if (!queued) {
      launch->args.give_back();
      return make_error(env, Code::kResourceExhausted, "no thread to start the execution on");
    }
    return atom(env, "ok");
  });
}

// measure_execute(executable, args, iterations): ns per execute + await + dropping the outputs, the
// C++ library's own dispatch on this thread (a dirty scheduler): the baseline of
// bench/overhead.exs, measured in the same process as the Elixir calls it is compared with.
PB_NIF(nif_measure_execute) {
  (void)argc;
  return guarded(env, "measuring execute", [&] {
    auto* exe = get_resource<ExecutableResource>(env, argv[0]);
    if (!exe) return make_error(env, Code::kInvalidArgument, "not a plugboard executable");
    auto args = take_arguments(env, argv[1], {});
    if (!args) return make_error(env, args.error());
    auto n = get_int(env, argv[2], "iterations");
    if (!n || *n <= 0) return make_error(env, Code::kInvalidArgument, "iterations must be a positive integer");
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < *n; ++i) {
      auto execution = exe->executable.execute(args->pointers);
      if (!execution) return make_error(env, execution.error());
      if (Status s = execution->await(); !s) return make_error(env, s.error());
    }
    const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return make_ok(env, enif_make_double(env, ns / static_cast<double>(*n)));
  });
}

// reply(call, results): :ok, or {:error, e} for an answer that does not fit (which fails the call too)
PB_NIF(nif_reply) {
  (void)argc;
  return guarded(env, "answering a host callback", [&] {
    void* handle = nullptr;
    if (!enif_get_resource(env, argv[0], resource_type<CallResource>(), &handle))
      return make_error(env, Code::kInvalidArgument, "not a plugboard host call");
    CallResource* call = static_cast<ResourceSlot<CallResource>*>(handle)->object;
    Status answered = call->call->answer(env, argv[1]);
    if (call->monitored.exchange(false)) enif_demonitor_process(env, handle, &call->monitor);
    return make_status(env, answered);
  });
}

// fail_call(call, message): the call fails with UNKNOWN and `message` (a callback that raised)
PB_NIF(nif_fail_call) {
  (void)argc;
  return guarded(env, "failing a host callback", [&] {
    auto* call = get_resource<CallResource>(env, argv[0]);
    if (!call) return make_error(env, Code::kInvalidArgument, "not a plugboard host call");
    auto message = get_string(env, argv[1], "message");
    if (!message) return make_error(env, message.error());
    call->call->fail(Error(Code::kUnknown, "host callback " + call->call->name() + " failed: " + *message));
    return atom(env, "ok");
  });
}

}  // namespace plugboard::nif
