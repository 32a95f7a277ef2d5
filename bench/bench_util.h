// Shared pieces of plugboard_bench: the per-plugin context, raw PJRT C API error checks for the
// baselines, interleaved repetition timing with medians, and a plain-text table printer.
#pragma once

#include <pjrt_c_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/client.h"

namespace pbbench {

// add f32[4] + f32[4]: the program the dispatch benchmarks time.
inline constexpr char kAddF32x4[] =
    "module @add attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
    "  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = stablehlo.add %a, %b : tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n"
    "}\n";

using Clock = std::chrono::steady_clock;

struct Options {
  bool quick = false;
  std::filesystem::path cases;  // the conformance suite's cases/ folder
};

// One plugin under test. The baselines call `api` directly on the same PJRT_Client plugboard made,
// so both sides drive the same client and device.
struct Context {
  std::string label;  // "xla_cpu_pjrt.so (PJRT 0.81)"
  std::shared_ptr<plugboard::Client> client;
  const PJRT_Api* api = nullptr;
  PJRT_Client* raw_client = nullptr;
  PJRT_Device* raw_device = nullptr;
  Options opt;
};

// ---- raw C API helpers (baseline side) ------------------------------------------------------------

// Zeroed PJRT argument struct `name` of type `T` with the header's struct_size: plain C style.
#define RAW_ARGS(T, name) \
  T name;                 \
  std::memset(&name, 0, sizeof(name)); \
  name.struct_size = T##_STRUCT_SIZE

// Throws with the plugin's message (and destroys the error) when `err` is set.
inline void raw_check(const PJRT_Api* api, PJRT_Error* err, const char* what) {
  if (!err) return;
  RAW_ARGS(PJRT_Error_Message_Args, m);
  m.error = err;
  api->PJRT_Error_Message(&m);
  std::string msg = std::string(what) + ": " + std::string(m.message ? m.message : "", m.message_size);
  RAW_ARGS(PJRT_Error_Destroy_Args, d);
  d.error = err;
  api->PJRT_Error_Destroy(&d);
  throw std::runtime_error(msg);
}

inline void raw_await_and_destroy(const PJRT_Api* api, PJRT_Event* ev, const char* what) {
  if (!ev) return;
  RAW_ARGS(PJRT_Event_Await_Args, aw);
  aw.event = ev;
  PJRT_Error* err = api->PJRT_Event_Await(&aw);
  RAW_ARGS(PJRT_Event_Destroy_Args, de);
  de.event = ev;
  api->PJRT_Event_Destroy(&de);
  raw_check(api, err, what);
}

inline void raw_buffer_destroy(const PJRT_Api* api, PJRT_Buffer* b) {
  RAW_ARGS(PJRT_Buffer_Destroy_Args, d);
  d.buffer = b;
  raw_check(api, api->PJRT_Buffer_Destroy(&d), "PJRT_Buffer_Destroy");
}

// PJRT_Client_Compile of MLIR text/bytecode with serialized CompileOptionsProto bytes.
inline PJRT_LoadedExecutable* raw_compile(const Context& ctx, const std::string& code, const std::string& options) {
  static const char kFormat[] = "mlir";
  RAW_ARGS(PJRT_Program, prog);
  prog.code = const_cast<char*>(code.data());
  prog.code_size = code.size();
  prog.format = kFormat;
  prog.format_size = sizeof(kFormat) - 1;
  RAW_ARGS(PJRT_Client_Compile_Args, c);
  c.client = ctx.raw_client;
  c.program = &prog;
  c.compile_options = options.data();
  c.compile_options_size = options.size();
  raw_check(ctx.api, ctx.api->PJRT_Client_Compile(&c), "PJRT_Client_Compile");
  return c.executable;
}

inline void raw_executable_destroy(const PJRT_Api* api, PJRT_LoadedExecutable* exe) {
  RAW_ARGS(PJRT_LoadedExecutable_Destroy_Args, d);
  d.executable = exe;
  raw_check(api, api->PJRT_LoadedExecutable_Destroy(&d), "PJRT_LoadedExecutable_Destroy");
}

// Unwraps a plugboard result or throws its message.
template <class T>
T value_or_throw(plugboard::Expected<T> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().to_string());
  return std::move(*r);
}
inline void ok_or_throw(const plugboard::Status& s, const char* what) {
  if (!s) throw std::runtime_error(std::string(what) + ": " + s.error().to_string());
}

// Keeps the compiler from treating memory as dead (memcpy into a buffer nobody reads).
inline void clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// ---- timing ---------------------------------------------------------------------------------------

// Runs a benchmark body `n` times and returns the elapsed seconds (the loop lives inside, so the
// std::function indirection is paid once per batch, not per iteration).
using Batch = std::function<double(int64_t n)>;

template <class F>
Batch batch(F body) {
  return [body = std::move(body)](int64_t n) mutable {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < n; ++i) body();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
}

// Iterations for one repetition of about `target_s`, from a short trial run (at least `min_iters`).
int64_t calibrate(Batch& b, double target_s, int64_t min_iters = 1);

// Repetitions of every variant, interleaved (ABC, CBA, ABC, ...) so that drift of the machine hits
// all of them alike. Returns, per variant, the seconds per iteration of each repetition.
std::vector<std::vector<double>> run_interleaved(std::vector<Batch>& variants, const std::vector<int64_t>& iters,
                                                 int reps);

double median(std::vector<double> v);
// Median of a[i] / b[i] over paired repetitions (adjacent in time, so drift cancels).
double paired_ratio(const std::vector<double>& a, const std::vector<double>& b);
// Interquartile range / median, as a percentage: how noisy the repetitions were.
double spread_pct(const std::vector<double>& v);

// ---- output ---------------------------------------------------------------------------------------

std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

// One goal of the issues' benchmarks, as measured: collected from every table into the summary
// plugboard_bench prints last.
struct Goal {
  std::string what;      // "dispatch add f32[4]: execute_into/raw"
  std::string target;    // "<= 1.05x"
  std::string measured;  // "1.031x"
  bool met = false;
};

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  std::vector<Goal> goals;
  void print(std::FILE* out = stdout) const;
  // Records a ratio goal: met when `value` <= limit (at_most) or >= limit.
  void goal(std::string what, double value, double limit, bool at_most);
};

// One run's goals, in the order measured, each with its plugin's label.
using RunGoals = std::vector<std::pair<std::string, Goal>>;

// The summary of every goal over consecutive runs: one row each with its plugin, each run's figure,
// and a check when every run met it, else a cross.
void print_goal_summary(const std::vector<RunGoals>& runs, std::FILE* out = stdout);

// f32 buffers of the given shapes on the client's first device, every element 0.5, ready.
std::vector<plugboard::Buffer> device_inputs(Context& ctx, const std::vector<std::vector<int64_t>>& shapes);

// The benchmarks; each returns its table or throws.
Table bench_dispatch(Context& ctx);
Table bench_transfer(Context& ctx);
Table bench_compile(Context& ctx);
Table bench_compile_cache(Context& ctx);
Table bench_threads(Context& ctx);
Table bench_threads_callbacks(Context& ctx);
Table bench_program_size(Context& ctx);
Table bench_trace(Context& ctx);

}  // namespace pbbench
