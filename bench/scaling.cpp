// Costs as work grows (issue 16), each against the raw C API in the same run:
//   threads: executions per second of a tiny add on one client with 1, 2, 4, 8, 16 threads, each
//            thread with its own output storage (Executable::execute_into) or RawExecution;
//   threads with a host callback: the same with y = cb(x) + cb(x), cb a blocking identity callback:
//            plugboard's execute_with_callbacks (a per-execution context carrying the receiver)
//            against a handler the raw side registers itself through the plugin's FFI extension;
//   program size: compile time and dispatch of a chain of 10, 100, 1,000 elementwise ops.
// scripts/bench_plots.sh draws both as PNG.
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "abi/ffi.h"
#include "bench_util.h"
#include "callback/execute.h"
#include "callback/registry.h"
#include "instruction_count.h"
#include "plugin/plugin.h"
#include "raw_execution.h"

namespace pbbench {
namespace {

// x -> ((x + x) * x - x) max x ... : `n` elementwise ops over f32[64], each reading the last.
std::string chain_program(int n) {
  static const char* const kOps[] = {"add", "multiply", "subtract", "maximum"};
  std::string text = "func.func public @main(%x: tensor<64xf32>) -> tensor<64xf32> {\n";
  std::string last = "%x";
  for (int i = 0; i < n; ++i) {
    const std::string v = "%v" + std::to_string(i);
    text += "  " + v + " = stablehlo." + kOps[i % 4] + " " + last + ", %x : tensor<64xf32>\n";
    last = v;
  }
  return text + "  return " + last + " : tensor<64xf32>\n}\n";
}

// y = cb(x) + cb(x) over f32[4], cb the blocking custom call `target`.
std::string callback_program(const std::string& target) {
  return "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
         "  %t = stablehlo.custom_call @" + target + "(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>\n"
         "  %y = stablehlo.add %t, %t : tensor<4xf32>\n"
         "  return %y : tensor<4xf32>\n"
         "}\n";
}

// The raw side's host callback: an XLA FFI handler a C API user writes and registers themselves,
// copying its one operand into its one result. No per-execution data: the least a callback costs.
// It marks that it ran (read-mostly: no contention between the threads of the benchmark).
std::atomic<bool> g_raw_identity_ran{false};
extern "C" XLA_FFI_Error* raw_identity_handler(XLA_FFI_CallFrame* frame) {
  if (plugboard::abi::ffi_answer_metadata(frame)) return nullptr;
  const auto* in = static_cast<const XLA_FFI_Buffer*>(frame->args.args[0]);
  auto* out = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  std::memcpy(out->data, in->data, 4 * sizeof(float));
  if (!g_raw_identity_ran.load(std::memory_order_relaxed)) g_raw_identity_ran.store(true);
  return nullptr;
}
constexpr char kRawIdentity[] = "pbbench_raw_identity";

void register_raw_identity(Context& ctx) {
  using namespace plugboard;
  static std::mutex mutex;
  static std::set<const Plugin*> registered_on;  // once per plugin (plugins are never unloaded)
  const Plugin& plugin = ctx.client->plugin();
  std::lock_guard lock(mutex);
  if (registered_on.contains(&plugin)) return;
  const PB_PJRT_FFI_Extension* ext = value_or_throw(abi::find_ffi_extension(plugin.api()), "find_ffi_extension");
  const std::string platform = value_or_throw(callback_platform(*ctx.client), "callback_platform");
  ok_or_throw(abi::ffi_register_handler(plugin.api(), *ext, kRawIdentity, platform,
                                        reinterpret_cast<XLA_FFI_Handler*>(&raw_identity_handler)),
              "registering the raw handler");
  registered_on.insert(&plugin);
}

struct Compiled {
  std::shared_ptr<plugboard::Executable> exe;
  std::unique_ptr<RawExecutable> raw;
};

void compile_both(Context& ctx, const std::string& text, Compiled& out) {
  using namespace plugboard;
  const CompileOptions options;
  const Program program = value_or_throw(Program::from_bytes(text, "scaling.mlir"), "Program::from_bytes");
  out.exe = value_or_throw(ctx.client->compile(program, options), "Client::compile");
  out.raw = std::make_unique<RawExecutable>(ctx.api, raw_compile(ctx, text, options.serialize()));
}

using MakeBody = std::function<std::function<void()>(int)>;

// Executions per second, raw and plugboard, of `threads` threads kept for the whole measurement:
// `reps` pairs of adjacent phases, in each of which every thread runs its raw body (in the other
// phase, its plugboard body) until the phase's deadline. The same threads run both sides, so neither pays
// for new threads (nor gets fresher malloc arenas or warmer caches) that the other does not.
struct PairedRates {
  std::vector<double> raw, pb;
};
// Phase p of a pair runs plugboard when true. The order alternates from pair to pair (raw first, then
// plugboard first, ...), so a steady drift of the machine does not land on one side.
constexpr bool phase_is_pb(int p) { return ((p % 2) ^ ((p / 2) % 2)) != 0; }

PairedRates paired_rates(int threads, double seconds, int reps, const MakeBody& make_raw, const MakeBody& make_pb) {
  const int phases = 2 * reps;
  std::atomic<int> phase{-1};          // the phase running now; `phases` ends the threads
  std::atomic<bool> stop{false};       // the running phase's deadline has passed
  std::atomic<int> finished{0};        // threads done with the running phase
  std::atomic<int> ready{0};           // threads that made their bodies and wait for phase 0
  std::vector<int64_t> counts(static_cast<size_t>(phases), 0);
  std::mutex counts_mutex;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const std::function<void()> bodies[2] = {make_raw(t), make_pb(t)};
      ready.fetch_add(1, std::memory_order_acq_rel);
      for (int p = 0; p < phases; ++p) {
        while (phase.load(std::memory_order_acquire) < p) std::this_thread::yield();
        const std::function<void()>& body = bodies[phase_is_pb(p)];
        int64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          body();
          ++n;
        }
        {
          std::lock_guard lock(counts_mutex);
          counts[static_cast<size_t>(p)] += n;
        }
        finished.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  while (ready.load(std::memory_order_acquire) < threads) std::this_thread::yield();  // no start-up in phase 0
  PairedRates out;
  for (int p = 0; p < phases; ++p) {
    stop.store(false);
    finished.store(0);
    const auto t0 = std::chrono::steady_clock::now();
    phase.store(p, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop.store(true);
    while (finished.load(std::memory_order_acquire) < threads) std::this_thread::yield();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (phase_is_pb(p) ? out.pb : out.raw).push_back(static_cast<double>(counts[static_cast<size_t>(p)]) / elapsed);
  }
  for (auto& th : pool) th.join();
  return out;
}

// Which goal a thread table checks: each pb/raw within 1.05 (plain dispatch), or each pb/raw within
// 1.10 of the one-thread pb/raw (flat: what plugboard adds does not grow with the callers).
enum class ThreadGoal { kWithinRaw, kFlat };

// One row per thread count: raw and plugboard rates, interleaved and paired, and the goal.
void thread_rows(Table& t, const char* what, ThreadGoal goal, double seconds, int reps,
                 const MakeBody& make_raw, const MakeBody& make_pb) {
  double one_thread = 0;
  for (int threads : {1, 2, 4, 8, 16}) {
    const PairedRates rates = paired_rates(threads, seconds, reps, make_raw, make_pb);
    const std::vector<double>& raw_rates = rates.raw;
    const std::vector<double>& pb_rates = rates.pb;
    std::vector<double> ratios;  // time ratio pb/raw of adjacent phases
    for (size_t r = 0; r < raw_rates.size(); ++r) ratios.push_back(raw_rates[r] / pb_rates[r]);
    const double ratio = median(ratios);
    if (threads == 1) one_thread = ratio;
    std::vector<std::string> row = {std::to_string(threads), fmt("%.0f", median(raw_rates)), fmt("%.0f", median(pb_rates)),
                                    fmt("%.3fx", ratio)};
    if (goal == ThreadGoal::kWithinRaw) {
      row.push_back(ratio <= 1.05 ? "<=1.05 ok" : "<=1.05 MISS");
      t.goal(fmt("%d thread(s) on one client%s: time per execution pb/raw", threads, what), ratio, 1.05, true);
    } else {
      const double flat = ratio / one_thread;
      row.push_back(fmt("%.3fx", flat));
      row.push_back(flat <= 1.10 ? "<=1.10 ok" : "<=1.10 MISS");
      if (threads > 1)
        t.goal(fmt("%d threads on one client%s: pb/raw over the 1-thread pb/raw", threads, what), flat, 1.10, true);
    }
    t.rows.push_back(std::move(row));
  }
}

}  // namespace

Table bench_threads(Context& ctx) {
  using namespace plugboard;
  if (running_under_callgrind()) {  // not timed: valgrind runs one thread at a time
    Table t;
    t.title = "scaling: executions per second vs threads: not timed under callgrind";
    return t;
  }
  Compiled add;
  compile_both(ctx, kAddF32x4, add);
  std::vector<Buffer> inputs = device_inputs(ctx, {{4}, {4}});
  Buffer* args[] = {&inputs[0], &inputs[1]};
  PJRT_Buffer* raw_args[] = {inputs[0].raw(), inputs[1].raw()};
  // Short paired repetitions, many of them: threads on 2 cores make each one noisy.
  const double seconds = ctx.opt.quick ? 0.1 : 0.2;
  const int reps = ctx.opt.quick ? 1 : 7;

  Table t;
  t.title = "scaling: executions per second of add f32[4] on one client vs threads";
  t.header = {"threads", "raw C API /s", "plugboard /s", "pb/raw", "goal"};
  thread_rows(
      t, "", ThreadGoal::kWithinRaw, seconds, reps,
      [&](int) -> std::function<void()> {
        return [run = std::make_shared<RawExecution>(ctx.api, add.raw->get(), std::span<PJRT_Buffer* const>(raw_args), 1)] { run->run(); };
      },
      [&](int) -> std::function<void()> {
        return [&, kept = std::make_shared<std::vector<Buffer>>()] {
          ok_or_throw(add.exe->execute_into(args, *kept), "execute_into");
        };
      });
  t.notes.push_back("pb/raw: time per execution, plugboard over raw (raw rate / plugboard rate), median over adjacent "
                    "phases run by the same threads");
  t.notes.push_back("each thread keeps its own outputs (execute_into) and its own RawExecution; one executable, shared inputs");
  return t;
}

Table bench_threads_callbacks(Context& ctx) {
  using namespace plugboard;
  auto receiver = std::make_shared<HostCallbacks>();
  std::atomic<bool> pb_ran{false};
  ok_or_throw(receiver->add_blocking("pbbench_identity", [&pb_ran](const BlockingCall& c) {
    if (!pb_ran.load(std::memory_order_relaxed)) pb_ran.store(true);
    std::memcpy(c.results()[0].bytes.data(), c.operands()[0].bytes.data(), c.operands()[0].bytes.size());
    return Status{};
  }), "add_blocking");
  ok_or_throw(declare_callbacks(*ctx.client, *receiver), "declare_callbacks");
  register_raw_identity(ctx);
  Compiled pb_side, raw_side;
  compile_both(ctx, callback_program("pbbench_identity"), pb_side);
  compile_both(ctx, callback_program(kRawIdentity), raw_side);
  std::vector<Buffer> inputs = device_inputs(ctx, {{4}});
  // Both programs must call their callback and compute 2x before their speed means anything.
  {
    std::vector<Buffer> out = value_or_throw(execute_with_callbacks(*pb_side.exe, std::span<Buffer* const>(std::array{&inputs[0]}), receiver),
                                             "execute_with_callbacks");
    float y[4];
    ok_or_throw(out[0].to_host(std::as_writable_bytes(std::span(y))), "to_host");
    if (!pb_ran || y[0] != 1.0f || y[3] != 1.0f) throw std::runtime_error("the callback program did not call back or returned wrong values");
    PJRT_Buffer* raw_args[] = {inputs[0].raw()};
    RawExecution raw(ctx.api, raw_side.raw->get(), std::span<PJRT_Buffer* const>(raw_args), 1);
    raw.run(true);
    RAW_ARGS(PJRT_Buffer_ToHostBuffer_Args, d2h);
    d2h.src = raw.output(0);
    d2h.dst = y;
    d2h.dst_size = sizeof y;
    raw_check(ctx.api, ctx.api->PJRT_Buffer_ToHostBuffer(&d2h), "PJRT_Buffer_ToHostBuffer");
    raw_await_and_destroy(ctx.api, d2h.event, "ToHostBuffer event");
    raw_buffer_destroy(ctx.api, raw.output(0));
    if (!g_raw_identity_ran || y[0] != 1.0f || y[3] != 1.0f)
      throw std::runtime_error("the raw callback program did not call back or returned wrong values");
  }
  Buffer* args[] = {&inputs[0]};
  PJRT_Buffer* raw_args[] = {inputs[0].raw()};
  // Short paired repetitions, many of them: threads on 2 cores make each one noisy.
  const double seconds = ctx.opt.quick ? 0.1 : 0.2;
  const int reps = ctx.opt.quick ? 1 : 7;

  Table t;
  t.title = "scaling: executions per second of y = cb(x) + cb(x), a blocking host callback, vs threads";
  if (running_under_callgrind()) {  // scripts/bench_instructions.sh: one thread's loop, counted alone
    RawExecution raw(ctx.api, raw_side.raw->get(), std::span<PJRT_Buffer* const>(raw_args), 1);
    count_instructions("callback identity | raw", [&] { raw.run(); });
    count_instructions("callback identity | execute_with_callbacks", [&] {
      (void)value_or_throw(execute_with_callbacks(*pb_side.exe, args, receiver), "execute_with_callbacks");
    });
    t.title += ": counted under callgrind, not timed";
    return t;
  }
  t.header = {"threads", "raw C API /s", "plugboard /s", "pb/raw", "vs 1 thread", "goal"};
  thread_rows(
      t, " with a callback", ThreadGoal::kFlat, seconds, reps,
      [&](int) -> std::function<void()> {
        return [run = std::make_shared<RawExecution>(ctx.api, raw_side.raw->get(), std::span<PJRT_Buffer* const>(raw_args), 1)] {
          run->run();
        };
      },
      [&](int) -> std::function<void()> {
        return [&] { (void)value_or_throw(execute_with_callbacks(*pb_side.exe, args, receiver), "execute_with_callbacks"); };
      });
  t.notes.push_back("raw: an XLA FFI handler registered through the plugin's FFI extension, no execution context; "
                    "plugboard: execute_with_callbacks (a pooled PJRT_ExecuteContext per execution, routing the call "
                    "to this execution's receiver)");
  t.notes.push_back("pb/raw: time per execution, plugboard over raw, median over adjacent phases; goal: flat, each pb/raw "
                    "within 1.10 of the 1-thread pb/raw (the per-execution routing is a fixed cost: "
                    "scripts/bench_instructions.sh counts it)");
  return t;
}

Table bench_program_size(Context& ctx) {
  using namespace plugboard;
  Table t;
  t.title = "scaling: compile time and dispatch vs program size (a chain of elementwise ops on f32[64])";
  t.header = {"ops", "compile raw ms", "compile pb ms", "pb/raw", "execute raw us", "execute pb us", "pb/raw"};
  for (int n : {10, 100, 1000}) {
    const std::string text = chain_program(n);
    const CompileOptions options;
    const std::string options_bytes = options.serialize();
    const Program program = value_or_throw(Program::from_bytes(text, "chain.mlir"), "Program::from_bytes");
    std::vector<Batch> compiles = {
        batch([&] { raw_executable_destroy(ctx.api, raw_compile(ctx, text, options_bytes)); }),
        batch([&] { (void)value_or_throw(ctx.client->compile(program, options), "Client::compile"); }),
    };
    for (auto& c : compiles) c(1);
    auto ct = run_interleaved(compiles, {1, 1}, ctx.opt.quick ? 2 : 5);

    Compiled chain;
    compile_both(ctx, text, chain);
    std::vector<Buffer> inputs = device_inputs(ctx, {{64}});
    Buffer* args[] = {&inputs[0]};
    PJRT_Buffer* raw_args[] = {inputs[0].raw()};
    RawExecution raw(ctx.api, chain.raw->get(), std::span<PJRT_Buffer* const>(raw_args), 1);
    std::vector<Buffer> kept;
    std::vector<Batch> runs = {batch([&] { raw.run(); }),
                               batch([&] { ok_or_throw(chain.exe->execute_into(args, kept), "execute_into"); })};
    for (auto& r : runs) calibrate(r, 0.02);
    const int64_t iters = calibrate(runs[0], ctx.opt.quick ? 0.02 : 0.06, 10);
    auto rt = run_interleaved(runs, {iters, iters}, ctx.opt.quick ? 5 : 11);
    t.rows.push_back({std::to_string(n), fmt("%.1f", median(ct[0]) * 1e3), fmt("%.1f", median(ct[1]) * 1e3),
                      fmt("%.3fx", paired_ratio(ct[1], ct[0])), fmt("%.2f", median(rt[0]) * 1e6),
                      fmt("%.2f", median(rt[1]) * 1e6), fmt("%.3fx", paired_ratio(rt[1], rt[0]))});
  }
  t.notes.push_back("pb/raw: median of paired (adjacent-in-time) ratios; compile: Client::compile (signature read too) vs PJRT_Client_Compile");
  return t;
}

}  // namespace pbbench
