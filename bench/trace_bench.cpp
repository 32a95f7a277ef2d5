// What traces cost (src/base/trace.h): a span with tracing off and on, and the dispatch loop
// (execute_into of add f32[4], inputs on the device) with tracing off and on. Off and on alternate
// repetition by repetition, so that the machine's drift hits both alike; under callgrind
// (scripts/bench_instructions.sh) each loop is also counted alone.
#include "base/trace.h"
#include "bench_util.h"
#include "instruction_count.h"

namespace pbbench {
namespace {

// One span as an instrumented site makes it: a Scope with an integer argument.
void one_span(int64_t i) {
  plugboard::trace::Scope span("bench", "bench");
  span.arg("i", i);
}

// Seconds per iteration of `body` run `n` times, off and on, over `reps` alternating repetitions;
// each "on" repetition runs in a trace of its own, started and stopped outside the timing.
struct OffOn {
  std::vector<double> off, on;
};
template <class F>
OffOn time_off_on(F body, int64_t n, int reps) {
  OffOn r;
  for (int k = 0; k < reps; ++k) {
    for (int side = 0; side < 2; ++side) {
      const bool traced = (k + side) % 2 == 1;  // ABBA order
      if (traced) ok_or_throw(plugboard::trace::start({.max_spans = static_cast<size_t>(n) * 8 + 16}), "trace::start");
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < n; ++i) body(i);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(n);
      if (traced) {
        auto t = plugboard::trace::stop();
        if (!t) throw std::runtime_error("trace::stop: " + t.error().to_string());
        if (t->dropped_spans != 0) throw std::runtime_error("the benchmark's trace dropped spans");
      }
      (traced ? r.on : r.off).push_back(s);
    }
  }
  return r;
}

}  // namespace

Table bench_trace(Context& ctx) {
  using namespace plugboard;
  const bool quick = ctx.opt.quick;
  const int reps = quick ? 5 : 15;

  Program program = value_or_throw(Program::from_bytes(kAddF32x4, "add"), "Program::from_bytes");
  auto exe = value_or_throw(ctx.client->compile(program, CompileOptions()), "Client::compile");
  std::vector<Buffer> inputs = device_inputs(ctx, {{4}, {4}});
  Buffer* args[] = {&inputs[0], &inputs[1]};
  std::vector<Buffer> kept;
  auto execute = [&](int64_t) {
    if (auto st = exe->execute_into(args, kept); !st) throw std::runtime_error("execute_into: " + st.error().to_string());
  };

  // Under callgrind: the off span, the on span, and the traced dispatch loop, each counted alone.
  count_instructions("trace span | off", [] { one_span(1); });
  if (running_under_callgrind()) {
    ok_or_throw(trace::start({.max_spans = 1 << 20}), "trace::start");
    count_instructions("trace span | on", [] { one_span(1); });
    count_instructions("dispatch add f32[4] | execute_into, tracing on", [&] { execute(0); });
    (void)trace::stop();
  }

  const OffOn spans = time_off_on(one_span, quick ? 20'000 : 200'000, reps);
  const OffOn runs = time_off_on(execute, quick ? 500 : 5'000, reps);

  Table t;
  t.title = "trace: cost of a span and of tracing the dispatch loop, off and on (median ns)";
  t.header = {"what", "off", "on", "on - off", "on/off", "spread off", "spread on", "reps x iters"};
  auto row = [&](const std::string& what, const OffOn& r, int64_t n) {
    const double off = median(r.off) * 1e9, on = median(r.on) * 1e9;
    t.rows.push_back({what, fmt("%.1f", off), fmt("%.1f", on), fmt("%.1f", on - off), fmt("%.3fx", paired_ratio(r.on, r.off)),
                      fmt("%.1f%%", spread_pct(r.off)), fmt("%.1f%%", spread_pct(r.on)),
                      fmt("%d x %lld", reps, static_cast<long long>(n))});
  };
  row("one span (Scope + 1 arg)", spans, quick ? 20'000 : 200'000);
  row("execute_into add f32[4]", runs, quick ? 500 : 5'000);
  t.notes.push_back("off: the instrumented site's relaxed load and branch; on: clock reads, a push into the thread's own buffer");
  t.notes.push_back("a traced execute_into records 3 spans: 'execute' and the plugin's call on the thread, 'execute' on the device's track");
  return t;
}

}  // namespace pbbench
