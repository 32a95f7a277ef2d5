// callback_bench: what one host callback costs inside a program, per CPU plugin.
//
//   callback_bench [--plugin PATH]... [--quick] [--json]
//
// For an f32[4] identity callback, four programs are timed in one run, interleaved:
//   plain      y = x + x
//   blocking   y = cb(x) + cb(x)'s result (a blocking identity callback), i.e. t = host(x); y = t + t
//   ordered    an ordered (non-blocking) call with x, then y = x + x
// and the same three inside a 1,000-iteration while loop (one call per iteration), which takes the
// dispatch out of the figure. A callback's cost is its program's time minus the plain program's.
// "ordered, awaited" waits until the host function has run (CallbackExecution::await); "ordered,
// program" waits only for the program (wait_executed): what the program itself pays.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "callback/execute.h"
#include "callback/registry.h"
#include "runtime/client.h"

#ifndef PLUGBOARD_DEPS_DIR
#define PLUGBOARD_DEPS_DIR ""
#endif

namespace {

using Clock = std::chrono::steady_clock;
using namespace plugboard;

[[noreturn]] void die(const std::string& what, const Error& e) {
  std::fprintf(stderr, "callback_bench: %s: %s\n", what.c_str(), e.to_string().c_str());
  std::exit(1);
}
template <class T>
T check(Expected<T> r, const std::string& what) {
  if (!r) die(what, r.error());
  return std::move(*r);
}
void check(Status r, const std::string& what) {
  if (!r) die(what, r.error());
}

std::string module(const std::string& body) {
  return "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
         "  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n" + body + "  }\n}\n";
}

const char* kBlockingCall =
    "    %t = stablehlo.custom_call @bench_identity(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>\n";
const char* kOrderedCall =
    "    stablehlo.custom_call @bench_log(%x) {api_version = 4 : i32, has_side_effect = true} : (tensor<4xf32>) -> ()\n";

std::string single(const std::string& call, bool use_t) {
  return module(call + "    %y = stablehlo.add " + std::string(use_t ? "%t, %t" : "%x, %x") +
                " : tensor<4xf32>\n    return %y : tensor<4xf32>\n");
}

// A 1,000-iteration loop whose body makes `call` on the carried value (or nothing).
std::string loop(const std::string& kind) {
  std::string call;
  std::string next = "%v";
  if (kind == "blocking") {
    call = "        %t = stablehlo.custom_call @bench_identity(%v) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>\n";
    next = "%t";
  } else if (kind == "ordered") {
    call = "        stablehlo.custom_call @bench_log(%v) {api_version = 4 : i32, has_side_effect = true} : (tensor<4xf32>) -> ()\n";
  }
  return module(R"(    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %n = stablehlo.constant dense<1000> : tensor<i32>
    %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
      cond {
        %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
)" + call + "        %w = stablehlo.add " + next + R"(, %v : tensor<4xf32>
        %i2 = stablehlo.add %i, %c1 : tensor<i32>
        stablehlo.return %i2, %w : tensor<i32>, tensor<4xf32>
      }
    return %r#1 : tensor<4xf32>
)");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Variant {
  std::string name;
  std::function<void()> run;
  std::vector<double> samples_us;  // mean per iteration, one per round
};

// Rounds of `iters` runs of each variant in turn; the median of the per-round means.
void measure(std::vector<Variant>& vs, int rounds, int iters) {
  for (auto& v : vs)
    for (int i = 0; i < iters / 4 + 1; ++i) v.run();  // warm
  for (int r = 0; r < rounds; ++r)
    for (auto& v : vs) {
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) v.run();
      v.samples_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
    }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, json = false;
  std::vector<std::string> plugins;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--json") json = true;
    else if (a == "--plugin" && i + 1 < argc) plugins.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: callback_bench [--plugin PATH]... [--quick] [--json]\n");
      return 2;
    }
  }
  if (plugins.empty())
    for (const char* rel : {"xla_cpu_081/xla_cpu_pjrt.so", "xla_cpu_106/libpjrt_cpu.so", "xla_cpu_115/pjrt_c_api_cpu_plugin.so"})
      plugins.push_back(std::string(PLUGBOARD_DEPS_DIR) + "/files/" + rel);
  const int rounds = quick ? 5 : 15, iters = quick ? 200 : 1000, loop_iters = quick ? 3 : 10;

  for (const auto& path : plugins) {
    auto plugin = check(load_plugin(path), "loading " + path);
    auto client = check(Client::create(plugin), "client of " + path);
    auto receiver = std::make_shared<HostCallbacks>();
    check(receiver->add_blocking("bench_identity", [](const BlockingCall& c) {
      std::memcpy(c.results()[0].bytes.data(), c.operands()[0].bytes.data(), c.operands()[0].bytes.size());
      return Status{};
    }), "add");
    uint64_t delivered = 0;
    check(receiver->add_ordered("bench_log", [&delivered](const OrderedCall&) {
      ++delivered;
      return Status{};
    }), "add");
    check(declare_callbacks(*client, *receiver), "declare");
    auto compile = [&](const std::string& text) {
      return check(client->compile(check(Program::from_bytes(text, "bench.mlir"), "program")), "compile");
    };
    auto plain = compile(single("", false)), blocking = compile(single(kBlockingCall, true)),
         ordered = compile(single(kOrderedCall, false));
    auto loop_plain = compile(loop("plain")), loop_blocking = compile(loop("blocking")),
         loop_ordered = compile(loop("ordered"));
    const float x[4] = {1, 2, 3, 4};
    Buffer bx = check(client->buffer_from_host(std::as_bytes(std::span(x)), DType::kF32, std::vector<int64_t>{4}), "x");
    Buffer* args[] = {&bx};
    auto run_plain = [&](const Executable& e) { check(e.execute(args), "execute"); };
    auto run_cb = [&](const Executable& e) { check(execute_with_callbacks(e, args, receiver), "execute"); };
    // The program's own time: the run is awaited (and its call delivered) only after the next run
    // has started, so the host's delivery overlaps the programs, as it does in a real pipeline.
    std::optional<CallbackExecution> previous;
    auto run_exec_only = [&](const Executable& e) {
      auto r = check(execute_with_callbacks_async(e, args, receiver), "execute");
      check(r.wait_executed(), "wait");
      if (previous) check(previous->await(), "await");
      previous.emplace(std::move(r));
    };
    std::vector<Variant> single_vs = {
        {"plain", [&] { run_plain(*plain); }, {}},
        {"plain, with callbacks attached", [&] { run_cb(*plain); }, {}},
        {"blocking", [&] { run_cb(*blocking); }, {}},
        {"ordered, awaited", [&] { run_cb(*ordered); }, {}},
        {"ordered, program", [&] { run_exec_only(*ordered); }, {}},
    };
    measure(single_vs, rounds, iters);
    std::vector<Variant> loop_vs = {
        {"loop plain", [&] { run_plain(*loop_plain); }, {}},
        {"loop blocking", [&] { run_cb(*loop_blocking); }, {}},
        {"loop ordered, awaited", [&] { run_cb(*loop_ordered); }, {}},
    };
    measure(loop_vs, rounds, loop_iters);

    const double p = median(single_vs[0].samples_us), pa = median(single_vs[1].samples_us),
                 b = median(single_vs[2].samples_us), oa = median(single_vs[3].samples_us),
                 op = median(single_vs[4].samples_us);
    const double lp = median(loop_vs[0].samples_us), lb = median(loop_vs[1].samples_us),
                 lo = median(loop_vs[2].samples_us);
    const std::string label = plugin->path().filename().string() + " (PJRT " + plugin->version().to_string() + ")";
    if (json) {
      std::printf("{\"plugin\": \"%s\", \"plain_us\": %.3f, \"plain_with_callbacks_us\": %.3f, \"blocking_us\": %.3f, "
                  "\"ordered_awaited_us\": %.3f, \"ordered_program_us\": %.3f, \"loop_plain_us\": %.3f, "
                  "\"loop_blocking_us\": %.3f, \"loop_ordered_us\": %.3f, \"blocking_cost_us\": %.3f, "
                  "\"ordered_awaited_cost_us\": %.3f, \"ordered_program_cost_us\": %.3f, "
                  "\"loop_blocking_cost_us\": %.4f, \"loop_ordered_cost_us\": %.4f}\n",
                  label.c_str(), p, pa, b, oa, op, lp, lb, lo, b - p, oa - p, op - p, (lb - lp) / 1000, (lo - lp) / 1000);
    } else {
      std::printf("%s\n", label.c_str());
      std::printf("  one call per execution (median of %d rounds x %d runs; µs per execute + await)\n", rounds, iters);
      for (const auto& v : single_vs) std::printf("    %-32s %9.2f\n", v.name.c_str(), median(v.samples_us));
      std::printf("    => blocking callback costs %.2f µs, ordered %.2f µs awaited / %.2f µs to the program\n", b - p,
                  oa - p, op - p);
      std::printf("  1,000 calls in a while loop (median of %d rounds x %d runs; µs per execution)\n", rounds, loop_iters);
      for (const auto& v : loop_vs) std::printf("    %-32s %9.1f\n", v.name.c_str(), median(v.samples_us));
      std::printf("    => per call: blocking %.3f µs, ordered %.3f µs\n", (lb - lp) / 1000, (lo - lp) / 1000);
    }
    std::fflush(stdout);
  }
  return 0;
}
