// execute/8 starts an execution (execute_partitioned/5: one of a program compiled for several
// devices, on all of them). A program that nothing says could run long starts on the calling
// scheduler (a small program on CPU often finishes inside the call: {:done, outcome}); every other
// one starts on a launch-pool thread (work_pool.h), since XLA's CPU client runs a program it thinks
// cheap inside PJRT_LoadedExecutable_Execute and counts a `while` body once, and a blocking host
// callback waits there for an Elixir process. Either way the call returns {:started, gate} at once
// and the outcome arrives as {:plugboard_done, ref, {:ok, [%Plugboard.Buffer{}]} | {:error, e}}
// from the execution's completion, after every ordered host call was sent (reply_gate.h: cancel/1
// stops it). reply/2 and fail_call/2 answer a blocking host call (callback_route.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "callback_route.h"
#include "inline_launch_judge.h"
#include "nif_functions.h"
#include "plugboard/trace.h"
#include "reply_gate.h"
#include "resources.h"
#include "run_counts.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

// A launch on the calling scheduler: only for programs under this many bytes of arguments and results
// (compile_policy.h decides the rest), and only while the executable's launches stay quick
// (inline_launch_judge.h).
constexpr size_t kInlineArgumentBytes = 64 * 1024;

// Executions started and not complete yet (run_counts.h), on every client. XLA's clients make a launch
// wait while a device has its most executions in flight (a semaphore in the client's execute path),
// whatever the program: a launch on a scheduler is only safe well below that.
constexpr int kInlineWhileInFlightBelow = 8;

// Runs `launch` (one call into the plugin's execute) and gives its wall time to `judge`.
template <typename Fn>
auto judged(InlineLaunchJudge& judge, Fn&& launch) {
  const auto started = std::chrono::steady_clock::now();
  auto outcome = launch();
  judge.judge(std::chrono::steady_clock::now() - started);
  return outcome;
}

ERL_NIF_TERM make_outputs(ErlNifEnv* env, std::vector<api::Buffer>& outputs, const std::shared_ptr<const api::Client>& client) {
  std::vector<ERL_NIF_TERM> buffers;
  buffers.reserve(outputs.size());
  for (api::Buffer& b : outputs) buffers.push_back(make_buffer_term(env, std::move(b), client));
  return make_ok(env, make_list(env, buffers));
}

// What an execution's completion needs: the gate to answer through, and the outputs (moved here
// before the completion is asked for, so that it never races with the move).
struct Completion {
  Completion(std::shared_ptr<ReplyGate> g, std::shared_ptr<const api::Client> c, std::chrono::steady_clock::time_point called)
      : gate(std::move(g)), client(std::move(c)), called(called) {}
  std::shared_ptr<ReplyGate> gate;
  std::shared_ptr<const api::Client> client;
  std::chrono::steady_clock::time_point called;  // the NIF call that started it (run_counts.h)
  std::vector<api::Buffer> outputs;
  InFlight in_flight;  // until the completion has run (it is held by the execution's on_complete)
  // Set once the NIF call answered {:started, ...}: from then on the run is this completion's to count,
  // and one destroyed without sending (its continuation lost) counts as a run that failed.
  std::atomic<bool> armed{false};
  std::atomic<bool> sent{false};

  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion() {
    if (armed.load(std::memory_order_acquire) && !sent.load(std::memory_order_acquire)) count_run(false, called);
  }

  // Never throws: a caller waiting without a time-out must get an answer.
  void send(Status status) noexcept {
    sent.store(true, std::memory_order_release);
    count_run(status.has_value(), called);
    try {
      OwnedEnv msg;
      ErlNifEnv* e = msg.get();
      ERL_NIF_TERM outcome = status ? make_outputs(e, outputs, client) : make_error(e, status.error());
      outputs.clear();
      gate->send("plugboard_done", msg, outcome);
    } catch (...) {
      gate->send_failure("plugboard_done", "sending the outputs of an execution");
    }
  }
};

// The arguments of one execution: references to each buffer, the donated ones taken out of their
// resources (and put back if the execution does not start).
struct Arguments {
  std::vector<std::shared_ptr<api::Buffer>> buffers;
  // Parallel to buffers: the resource a donated one left, kept until the execution has started (the
  // term may be garbage by then: a launch on a pool thread runs after the NIF call returned).
  std::vector<KeptResource<BufferResource>> donated_from;
  std::vector<api::Buffer*> pointers;
  size_t bytes = 0;

  void give_back() {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (donated_from[i] && buffers[i] && buffers[i]->valid()) {
        std::lock_guard lock(donated_from[i]->mutex);
        donated_from[i]->buffer = std::move(buffers[i]);
        donated_from[i]->gone = BufferResource::Gone::kNo;
      }
  }
};

// The donate list, every index checked against the arguments before any narrowing.
Expected<std::vector<int>> get_donate(ErlNifEnv* env, ERL_NIF_TERM term, unsigned argument_count) {
  std::vector<int> donate;
  ERL_NIF_TERM head, tail = term;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    const std::string what = "donate: element " + std::to_string(donate.size());
    if (argument_count == 0) return invalid_argument(what + " names an argument, but the execution has none");
    PB_ASSIGN_OR_RETURN(int64_t i, get_int_in(env, head, what + " (an argument index)", 0, argument_count - 1));
    if (std::find(donate.begin(), donate.end(), i) != donate.end())
      return invalid_argument("donate names argument " + std::to_string(i) + " twice");
    donate.push_back(static_cast<int>(i));
  }
  if (!enif_is_empty_list(env, tail)) return invalid_argument("donate must be a list of argument indices");
  return donate;
}

Expected<Arguments> take_arguments(ErlNifEnv* env, ERL_NIF_TERM list, const std::vector<int>& donate) {
  Arguments args;
  auto refuse = [&](Error e) -> Expected<Arguments> {
    args.give_back();
    return std::unexpected(std::move(e));
  };
  ERL_NIF_TERM head, tail = list;
  for (int i = 0; enif_get_list_cell(env, tail, &head, &tail); ++i) {
    const std::string what = "argument " + std::to_string(i);
    const ERL_NIF_TERM term = enif_is_map(env, head) ? map_get(env, head, "resource").value_or(head) : head;
    auto* resource = get_resource<BufferResource>(env, term);
    if (!resource) return refuse(Error(Code::kInvalidArgument, what + " is not a plugboard buffer"));
    const bool donated = std::find(donate.begin(), donate.end(), i) != donate.end();
    if (donated && resource->origin == BufferOrigin::kBinaryView)
      return refuse(Error(Code::kFailedPrecondition,
                          what + " is a view of an immutable Erlang binary (Plugboard.buffer/5 adopts binaries over 64 bytes): "
                                 "it cannot be donated; make it with copy: true to donate it"));
    if (donated && !resource->donatable())
      return refuse(Error(Code::kFailedPrecondition,
                          what + " is a view of device memory it does not own (Plugboard.buffer_from_pointer/5): "
                                 "it cannot be donated"));
    std::shared_ptr<api::Buffer> buffer;
    {
      std::lock_guard lock(resource->mutex);
      // ABORTED: a conflict of the moment (a caller donating on a user's behalf may run it again
      // without donating it); donatable?/1 answers the same question under the same lock.
      if (donated && resource->buffer && resource->buffer.use_count() > 1)
        return refuse(Error(Code::kAborted,
                            what + " is in use (being read, or an argument of an execution still starting on a thread: "
                                   "await it first): it cannot be donated"));
      if (resource->buffer && resource->buffer->valid()) buffer = donated ? resource->take(BufferResource::Gone::kDonated) : resource->buffer;
    }
    if (!buffer) {
      auto gone = resource->use(what);
      return refuse(gone ? Error(Code::kFailedPrecondition, what + " is gone") : gone.error());
    }
    args.bytes += buffer->byte_size();
    args.pointers.push_back(buffer.get());
    args.buffers.push_back(std::move(buffer));
    args.donated_from.push_back(donated ? keep_resource<BufferResource>(env, term) : KeptResource<BufferResource>());
  }
  if (!enif_is_empty_list(env, tail)) return refuse(Error(Code::kInvalidArgument, "the arguments must be a list of buffers"));
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
  if (!enif_is_empty_list(env, tail)) return invalid_argument("the callback routes must be a list");
  return routes;
}

struct Launch {
  std::shared_ptr<const api::Client> client;  // the executable's
  api::Executable executable;
  std::shared_ptr<InlineLaunchJudge> judge;  // the executable's, when it sent this launch to the pool (else null)
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
  Status report_on_completion(api::Execution& execution) {
    completion->outputs = std::move(execution.outputs());
    auto completion_ref = completion;
    // Dropping the execution never waits; its completion still runs.
    return execution.on_complete([completion_ref](Status s) { completion_ref->send(std::move(s)); });
  }

  // On a launch-pool thread: judged when the judge sent it here, so that the executable can come back
  // inline.
  void start() {
    Expected<api::Execution> execution = judge ? judged(*judge, [this] { return begin(); }) : begin();
    Status reported = execution ? report_on_completion(*execution) : Status(std::unexpected(std::move(execution).error()));
    if (!reported) completion->send(std::move(reported));
  }
};

// The devices an execution of `exe` started with `device` runs on: where ExecuteOptions::device says for
// a portable program or a device other than 0, else where the program was compiled for.
std::vector<int> run_devices(const api::Executable& exe, int device) {
  std::vector<int> compiled = exe.devices();
  if (device != 0 || compiled.empty()) return {device};
  return compiled;
}

// An execution started by a process that is answering a blocking host call of an execution on the
// same device (callback_route.h: answering_for).
Error waits_for_itself() {
  return Error(Code::kFailedPrecondition,
               "this process is answering a blocking host callback of an execution on the same device of the same "
               "client, which waits on the device for that answer; the device would run this execution only after "
               "that one, so it would wait for itself. Compute on the call's operands (host arrays) in the callback, "
               "or run on another device or client");
}

ERL_NIF_TERM make_gate_term(ErlNifEnv* env, const std::shared_ptr<ReplyGate>& gate) {
  return make_resource<GateResource>(env, gate);
}

}  // namespace

// execute(executable, args, donate, device, routes, blocking_limit_ms | nil, caller, ref)
//   -> {:started, gate} | {:done, {:ok, outputs} | {:error, e}} | {:error, e}
// While a trace is being recorded, {:started, gate, t0} and {:done, outcome, t0} instead: t0 is this
// call's start (trace::now()), the start of the run's span that Plugboard records when the outcome
// reaches the caller (the answer's shape is the check: nothing more for Elixir to read when off).
PB_NIF(nif_execute) {
  (void)argc;
  const auto called = std::chrono::steady_clock::now();
  const int64_t traced = trace::enabled() ? trace::now() : 0;
  auto answer = [env, traced](const char* tag, ERL_NIF_TERM value) {
    return traced ? enif_make_tuple3(env, atom(env, tag), value, enif_make_int64(env, traced))
                  : enif_make_tuple2(env, atom(env, tag), value);
  };
  // Who counts this run (run_counts.h): the completion once the answer is {:started, ...}; else this
  // call, as a run that failed unless it finished here with its outputs.
  bool left_to_completion = false;
  bool finished_ok = false;
  const ERL_NIF_TERM result = guarded(env, "starting an execution", [&] {
    auto* exe = get_resource<ExecutableResource>(env, argv[0]);
    if (!exe) return make_error(env, Code::kInvalidArgument, "not a plugboard executable");
    unsigned argument_count = 0;
    if (!enif_get_list_length(env, argv[1], &argument_count))
      return make_error(env, Code::kInvalidArgument, "the arguments must be a list of buffers");
    auto donate = get_donate(env, argv[2], argument_count);
    if (!donate) return make_error(env, donate.error());
    auto device = get_int_in(env, argv[3], "device", 0, std::numeric_limits<int>::max());
    if (!device) return make_error(env, device.error());
    auto route_list = get_routes(env, argv[4]);
    if (!route_list) return make_error(env, route_list.error());
    std::optional<std::chrono::milliseconds> limit;
    if (!is_nil(env, argv[5])) {
      auto ms = get_int_in(env, argv[5], "callback_timeout (ms)", 0, kMaxTimeoutMs);
      if (!ms) return make_error(env, ms.error());
      limit = std::chrono::milliseconds(*ms);
    }
    auto caller = get_pid(env, argv[6], "caller");
    if (!caller) return make_error(env, caller.error());
    if (anyone_answering() && answering_for(*caller, exe->client.get(), run_devices(exe->executable, static_cast<int>(*device))))
      return make_error(env, waits_for_itself());

    Launch here{exe->client, exe->executable, nullptr, {}, {}, nullptr};
    here.options.device = static_cast<int>(*device);
    here.options.donate = std::move(*donate);
    std::shared_ptr<ReplyGate> gate;
    if (!route_list->empty()) {
      gate = std::make_shared<ReplyGate>(*caller, argv[7]);
      auto routes = std::make_shared<ExecutionRoutes>();
      routes->gate = gate;
      routes->client = exe->client.get();
      routes->device = run_devices(exe->executable, static_cast<int>(*device)).front();
      routes->routes = std::move(*route_list);
      routes->blocking_limit = limit;
      auto receiver = make_receiver(std::move(routes));
      if (!receiver) return make_error(env, receiver.error());
      here.options.callbacks = std::move(*receiver);
    }
    auto args = take_arguments(env, argv[1], here.options.donate);
    if (!args) return make_error(env, args.error());
    here.args = std::move(*args);

    const bool judged_inline = exe->launch_judge->may_launch_inline();
    const bool launch_here = !gate && here.args.bytes <= kInlineArgumentBytes && judged_inline &&
                             run_counts().in_flight.load(std::memory_order_relaxed) < kInlineWhileInFlightBelow;
    if (launch_here) {
      Expected<api::Execution> execution = judged(*exe->launch_judge, [&here] { return here.begin(); });
      if (!execution) return make_error(env, execution.error());
      // The plugin ran it inside execute() (small programs on CPU): the outputs go back at once.
      if (execution->finished()) {
        Status status = execution->await();
        const ERL_NIF_TERM outcome = status ? make_outputs(env, execution->outputs(), exe->client) : make_error(env, status.error());
        finished_ok = status.has_value();
        return answer("done", outcome);
      }
      gate = std::make_shared<ReplyGate>(*caller, argv[7]);
      here.completion = std::make_shared<Completion>(gate, exe->client, called);
      const ERL_NIF_TERM gate_term = make_gate_term(env, gate);  // before the completion can send
      here.completion->armed.store(true, std::memory_order_release);
      Status reported = here.report_on_completion(*execution);
      if (!reported) {
        here.completion->armed.store(false, std::memory_order_release);  // never asked for: counted below
        return make_error(env, reported.error());
      }
      left_to_completion = true;
      return answer("started", gate_term);
    }
    if (!gate) gate = std::make_shared<ReplyGate>(*caller, argv[7]);
    if (!judged_inline && exe->launch_judge->allowed()) here.judge = exe->launch_judge;
    auto launch = std::make_shared<Launch>(std::move(here));
    launch->completion = std::make_shared<Completion>(gate, exe->client, called);
    ERL_NIF_TERM gate_term = make_gate_term(env, gate);
    launch->completion->armed.store(true, std::memory_order_release);
    if (!launch_pool().post([launch] { launch->start(); })) {
      launch->completion->armed.store(false, std::memory_order_release);  // it never ran: counted below
      launch->args.give_back();
      return make_error(env, Code::kResourceExhausted, "no thread to start the execution on");
    }
    left_to_completion = true;
    return answer("started", gate_term);
  });
  if (!left_to_completion) count_run(finished_ok, called);
  return result;
}

namespace {

// What a partitioned execution's completion needs: one list of outputs per device, and a count of the
// devices still running; the last device to finish sends every device's outputs (or the first error).
struct PartitionedCompletion {
  PartitionedCompletion(std::shared_ptr<ReplyGate> g, std::shared_ptr<const api::Client> c, size_t devices,
                        std::chrono::steady_clock::time_point called)
      : gate(std::move(g)), client(std::move(c)), outputs(devices), pending(devices), called(called) {}
  std::shared_ptr<ReplyGate> gate;
  std::shared_ptr<const api::Client> client;
  std::vector<std::vector<api::Buffer>> outputs;  // filled before any completion is asked for
  std::atomic<size_t> pending;
  std::mutex mutex;
  std::optional<Error> failed;  // the first device's error, under mutex
  std::chrono::steady_clock::time_point called;  // the NIF call that started it (run_counts.h)
  InFlight in_flight;

  // One device finished. Never throws: a caller waiting without a time-out must get an answer.
  void device_done(Status status) noexcept {
    try {
      if (!status) {
        std::lock_guard lock(mutex);
        if (!failed) failed = std::move(status).error();
      }
      if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      count_run(!failed.has_value(), called);  // one run, however many devices
      OwnedEnv msg;
      ErlNifEnv* e = msg.get();
      ERL_NIF_TERM outcome;
      if (failed) {
        outcome = make_error(e, *failed);
      } else {
        std::vector<ERL_NIF_TERM> lists;
        for (auto& device_outputs : outputs) {
          std::vector<ERL_NIF_TERM> buffers;
          for (api::Buffer& b : device_outputs) buffers.push_back(make_buffer_term(e, std::move(b), client));
          lists.push_back(make_list(e, buffers));
        }
        outcome = make_ok(e, make_list(e, lists));
      }
      outputs.clear();
      gate->send("plugboard_done", msg, outcome);
    } catch (...) {
      gate->send_failure("plugboard_done", "sending the outputs of a partitioned execution");
    }
  }
};

struct PartitionedLaunch {
  explicit PartitionedLaunch(api::Executable e) : executable(std::move(e)) {}
  api::Executable executable;
  std::vector<Arguments> args;  // one per device
  api::ExecuteOptions options;
  std::shared_ptr<PartitionedCompletion> completion;

  void give_back() {
    for (Arguments& a : args) a.give_back();
  }

  // On a launch-pool thread.
  void start() {
    std::vector<std::vector<api::Buffer*>> pointers;
    for (Arguments& a : args) pointers.push_back(a.pointers);
    Expected<std::vector<api::Execution>> executions = executable.execute_partitioned(pointers, options);
    if (!executions) give_back();
    args.clear();  // donated buffers were consumed; the others stay with their resources
    if (!executions) {
      // No device started: the first device's report answers for all of them.
      completion->pending.store(1, std::memory_order_relaxed);
      completion->device_done(std::unexpected(std::move(executions).error()));
      return;
    }
    for (size_t k = 0; k < executions->size(); ++k) completion->outputs[k] = std::move((*executions)[k].outputs());
    for (api::Execution& execution : *executions) {
      auto completion_ref = completion;
      // Dropping the execution never waits; its completion still runs.
      if (Status asked = execution.on_complete([completion_ref](Status s) { completion_ref->device_done(std::move(s)); }); !asked)
        completion->device_done(std::move(asked));
    }
  }
};

}  // namespace

// execute_partitioned(executable, [args per device], donate, caller, ref) -> {:started, gate} | {:error, e}
// The outcome arrives as {:plugboard_done, ref, {:ok, [[%Plugboard.Buffer{}] per device]} | {:error, e}}.
// Always started on a launch-pool thread: the plugin may run the devices' parts inside the call, and
// they wait for each other in their collectives.
PB_NIF(nif_execute_partitioned) {
  (void)argc;
  const auto called = std::chrono::steady_clock::now();
  bool left_to_completion = false;  // as in nif_execute: else this call counts a run that failed
  const ERL_NIF_TERM result = guarded(env, "starting a partitioned execution", [&] {
    auto* exe = get_resource<ExecutableResource>(env, argv[0]);
    if (!exe) return make_error(env, Code::kInvalidArgument, "not a plugboard executable");
    unsigned devices = 0;
    if (!enif_get_list_length(env, argv[1], &devices) || devices == 0)
      return make_error(env, Code::kInvalidArgument, "the arguments must be a non-empty list with one list of buffers per device");
    ERL_NIF_TERM head, tail = argv[1];
    unsigned argument_count = 0;
    if (!enif_get_list_cell(env, tail, &head, &tail) || !enif_get_list_length(env, head, &argument_count))
      return make_error(env, Code::kInvalidArgument, "argument list 0 must be a list of buffers");
    auto donate = get_donate(env, argv[2], argument_count);
    if (!donate) return make_error(env, donate.error());
    auto caller = get_pid(env, argv[3], "caller");
    if (!caller) return make_error(env, caller.error());
    if (anyone_answering() && answering_for(*caller, exe->client.get(), exe->executable.devices()))
      return make_error(env, waits_for_itself());

    auto launch = std::make_shared<PartitionedLaunch>(exe->executable);
    launch->options.donate = std::move(*donate);
    tail = argv[1];
    for (unsigned k = 0; enif_get_list_cell(env, tail, &head, &tail); ++k) {
      auto args = take_arguments(env, head, launch->options.donate);
      if (!args) {
        launch->give_back();
        return make_error(env, Error(args.error()).annotate("argument list " + std::to_string(k)));
      }
      launch->args.push_back(std::move(*args));
    }
    auto gate = std::make_shared<ReplyGate>(*caller, argv[4]);
    launch->completion = std::make_shared<PartitionedCompletion>(gate, exe->client, devices, called);
    ERL_NIF_TERM gate_term = make_gate_term(env, gate);
    if (!launch_pool().post([launch] { launch->start(); })) {
      launch->give_back();
      return make_error(env, Code::kResourceExhausted, "no thread to start the execution on");
    }
    left_to_completion = true;
    return enif_make_tuple2(env, atom(env, "started"), gate_term);
  });
  if (!left_to_completion) count_run(false, called);
  return result;
}

// cancelled?(gate): whether cancel/1 closed it (a later wait for it would never end)
PB_NIF(nif_cancelled) {
  (void)argc;
  auto* g = get_resource<GateResource>(env, argv[0]);
  if (!g) return enif_make_badarg(env);
  return atom(env, g->gate->closed() ? "true" : "false");
}

// cancel(gate): the caller gives up waiting: nothing more is sent for that call, and its waiting
// blocking host calls fail (freeing the threads they hold).
PB_NIF(nif_cancel) {
  (void)argc;
  return guarded(env, "cancelling", [&] {
    auto* g = get_resource<GateResource>(env, argv[0]);
    if (!g) return make_error(env, Code::kInvalidArgument, "not a plugboard call in flight");
    g->gate->close();
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

namespace {
// The bytes an answer copies into the program's results.
size_t answer_bytes(ErlNifEnv* env, ERL_NIF_TERM results) {
  size_t total = 0;
  ERL_NIF_TERM head, tail = results;
  ErlNifBinary bin;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    ERL_NIF_TERM data = head;
    if (enif_is_map(env, head)) data = map_get(env, head, "data").value_or(head);
    if (enif_inspect_binary(env, data, &bin)) total += bin.size;
  }
  return total;
}
}  // namespace

// reply(call, results): :ok, or {:error, e} for an answer that does not fit (which fails the call too).
// A large answer is copied on a dirty scheduler.
PB_NIF(nif_reply) {
  return guarded(env, "answering a host callback", [&] {
    if (on_normal_scheduler() && answer_bytes(env, argv[1]) > kDirtyCopyBytes)
      return enif_schedule_nif(env, "reply", ERL_NIF_DIRTY_JOB_CPU_BOUND, nif_reply, argc, argv);
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
