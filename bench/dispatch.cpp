// Dispatch overhead: one iteration = execute + await completion + destroy the outputs, with the
// inputs already on the device.
//   baseline:  a raw PJRT_LoadedExecutable_Execute loop (device_complete_events, PJRT_Event_Await,
//              PJRT_Event_Destroy, PJRT_Buffer_Destroy) on an executable compiled from the same
//              program with the same serialized CompileOptions bytes plugboard sends;
//   plugboard: Executable::execute.
// Both pass every argument as non-donatable, as plugboard does when nothing is donated, so the
// plugin does the same work on both sides.
#include <fstream>
#include <sstream>

#include "bench_util.h"
#include "instruction_count.h"
#include "raw_execution.h"

namespace pbbench {
namespace {

struct Case {
  std::string name;
  std::string mlir;
  std::vector<std::vector<int64_t>> arg_dims;  // all f32
  double rep_scale = 1.0;                      // relative length of one repetition
  bool expect_sum_of_halves = false;           // check: every output element is 0.5 + 0.5
};

struct Result {
  double raw_ns, pb_ns, ratio, raw_spread, pb_spread;
  double into_ns, into_ratio;
  int64_t iters;
  int reps;
};

Result run_case(Context& ctx, const Case& c) {
  using namespace plugboard;
  const PJRT_Api* api = ctx.api;
  const bool quick = ctx.opt.quick;

  // Plugboard's executable, and the baseline's from the same bytes and options.
  Program program = value_or_throw(Program::from_bytes(c.mlir, c.name), "Program::from_bytes");
  const CompileOptions options;
  auto exe = value_or_throw(ctx.client->compile(program, options), "Client::compile");
  const std::string options_bytes = options.serialize();
  RawExecutable raw_exe(api, raw_compile(ctx, c.mlir, options_bytes));

  // Inputs on the device, ready before timing starts.
  std::vector<Buffer> inputs = device_inputs(ctx, c.arg_dims);
  const size_t n_args = inputs.size();
  const size_t n_out = exe->num_outputs();

  // ---- baseline: the raw C API loop ----
  PJRT_Buffer* raw_inputs[RawExecution::kMax];
  for (size_t i = 0; i < n_args; ++i) raw_inputs[i] = inputs[i].raw();
  RawExecution raw(api, raw_exe.get(), std::span<PJRT_Buffer* const>(raw_inputs, n_args), n_out);
  auto raw_body = [&] { raw.run(); };

  // ---- plugboard ----
  Buffer* pb_args[8];
  for (size_t i = 0; i < n_args; ++i) pb_args[i] = &inputs[i];
  const std::span<Buffer* const> pb_span(pb_args, n_args);
  auto pb_body = [&] {
    auto outs = exe->execute(pb_span);
    if (!outs) throw std::runtime_error("Executable::execute: " + outs.error().to_string());
  };
  // The reuse loop: outputs land in storage kept across calls; each call releases the previous ones
  // (as the raw loop destroys its outputs each iteration).
  std::vector<Buffer> kept;
  auto into_body = [&] {
    if (auto st = exe->execute_into(pb_span, kept); !st)
      throw std::runtime_error("Executable::execute_into: " + st.error().to_string());
  };

  // Check the results once on both sides (every input is 0.5; for add each output element is 1).
  if (c.expect_sum_of_halves) {
    raw.run(/*keep=*/true);
    auto outs = value_or_throw(exe->execute(pb_span), "Executable::execute");
    for (int side = 0; side < 2; ++side) {
      std::vector<float> got(4, 0.0f);
      const std::span<std::byte> dst = std::as_writable_bytes(std::span<float>(got));
      if (side == 0) {
        RAW_ARGS(PJRT_Buffer_ToHostBuffer_Args, th);
        th.src = raw.output(0);
        th.dst = dst.data();
        th.dst_size = dst.size();
        raw_check(api, api->PJRT_Buffer_ToHostBuffer(&th), "PJRT_Buffer_ToHostBuffer");
        raw_await_and_destroy(api, th.event, "ToHostBuffer event");
        raw_buffer_destroy(api, raw.output(0));
      } else {
        ok_or_throw(outs[0].to_host(dst), "to_host");
      }
      for (float v : got)
        if (v != 1.0f) throw std::runtime_error(std::string(side ? "plugboard" : "raw") + " add gave a wrong result");
    }
  }

  Result r;
  // Under callgrind (scripts/bench_instructions.sh): each loop counted alone, the same iterations.
  count_instructions("dispatch " + c.name + " | raw", raw_body);
  count_instructions("dispatch " + c.name + " | execute", pb_body);
  count_instructions("dispatch " + c.name + " | execute_into", into_body);

  std::vector<Batch> variants = {batch(raw_body), batch(pb_body), batch(into_body)};
  // Warm up both (thread pools, caches, allocator), then size one repetition from the baseline.
  const double warm_s = quick ? 0.02 : 0.1;
  for (auto& v : variants) calibrate(v, warm_s);
  // Many short repetitions: on a loaded machine the median of many paired ratios is steadier than
  // a few long ones.
  const double rep_s = (quick ? 0.03 : 0.12) * c.rep_scale;
  const int reps = quick ? 7 : 21;
  const int64_t iters = calibrate(variants[0], rep_s, 10);
  auto times = run_interleaved(variants, {iters, iters, iters}, reps);

  r.raw_ns = median(times[0]) * 1e9;
  r.pb_ns = median(times[1]) * 1e9;
  r.ratio = paired_ratio(times[1], times[0]);
  r.raw_spread = spread_pct(times[0]);
  r.pb_spread = spread_pct(times[1]);
  r.into_ns = median(times[2]) * 1e9;
  r.into_ratio = paired_ratio(times[2], times[0]);
  r.iters = iters;
  r.reps = reps;
  return r;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Table bench_dispatch(Context& ctx) {
  std::vector<Case> cases;
  cases.push_back({"add f32[4]", kAddF32x4, {{4}, {4}}, 1.0, true});
  // A second, 5-argument program shows how the per-argument checks scale (skipped in --quick).
  if (!ctx.opt.quick) {
    const std::string mlp = read_file(ctx.opt.cases / "mlp_tiny" / "program.mlir");
    if (!mlp.empty()) cases.push_back({"mlp_tiny (5 args)", mlp, {{8, 16}, {16, 32}, {32}, {32, 10}, {10}}, 0.6});
  }

  Table t;
  t.title = "dispatch: execute + await + destroy outputs, inputs on device (median ns/iter)";
  t.header = {"program", "raw C API", "execute", "pb/raw", "execute_into", "into/raw", "goal (into)", "spread raw", "spread pb", "reps x iters"};
  for (const auto& c : cases) {
    const Result r = run_case(ctx, c);
    t.rows.push_back({c.name, fmt("%.0f", r.raw_ns), fmt("%.0f", r.pb_ns), fmt("%.3fx", r.ratio), fmt("%.0f", r.into_ns),
                      fmt("%.3fx", r.into_ratio), r.into_ratio <= 1.05 ? "<=1.05 ok" : "<=1.05 MISS",
                      fmt("%.1f%%", r.raw_spread), fmt("%.1f%%", r.pb_spread),
                      fmt("%d x %lld", r.reps, static_cast<long long>(r.iters))});
    t.goal("dispatch " + c.name + ": execute_into/raw", r.into_ratio, 1.05, true);
  }
  t.notes.push_back("pb/raw, into/raw: median over repetitions of the paired (adjacent-in-time) ratio; spread: interquartile range / median");
  t.notes.push_back("execute returns a fresh vector of outputs; execute_into reuses the caller's (the loop to write for speed)");

  return t;
}

}  // namespace pbbench
