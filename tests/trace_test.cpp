// Traces (include/plugboard/trace.h, src/base/trace.h): the recorder on its own (off records nothing,
// the cap drops and counts, threads recording at once, spans across threads), and the trace of a
// whole run on the real CPU plugins (selection stages, compile and the compile cache, copies,
// executions, delivery, host callbacks), read back with the project's JSON reader and checked: every
// span closed, nesting right per track, tracks named, the run's spans inside its measured time.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <latch>
#include <map>
#include <set>
#include <thread>

#include "base/strict_json.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "callback/execute.h"
#include "callback/ordered_delivery.h"
#include "callback/registry.h"
#include "compile_cache/cached_compile.h"
#include "select/select.h"
#include "test_env.h"
#include "test_programs.h"

namespace plugboard {
namespace {

using testing::cpu_plugins;
using testing::RealPlugin;
using json = strict_json::json;

// One "X" event of a written trace, times in nanoseconds (the JSON's microseconds have 3 decimals).
struct Event {
  std::string name, cat;
  int tid = 0;
  int64_t start = 0, end = 0;
  json args;
};

int64_t ns_of(const json& micros) { return static_cast<int64_t>(std::llround(micros.get<double>() * 1000.0)); }

// The trace as JSON, parsed by strict_json, with the checks every trace must pass: only "X" and "M"
// events (no "B" without "E"), each X closed (dur >= 0) on the trace's pid, every track that holds a
// span named by a thread_name event.
struct Parsed {
  std::vector<Event> events;
  std::map<int, std::string> track_names;
  json other;
};

Parsed parse_checked(const trace::Trace& t) {
  Parsed p;
  auto text = t.to_json();
  EXPECT_TRUE(text) << text.error().to_string();
  if (!text) return p;
  auto doc = strict_json::parse(*text, "the trace");
  EXPECT_TRUE(doc) << doc.error().to_string();
  if (!doc) return p;
  auto events = strict_json::get_container(*doc, "traceEvents", "trace", json::value_t::array);
  EXPECT_TRUE(events);
  if (!events) return p;
  p.other = (*doc)["otherData"];
  for (const json& e : **events) {
    const std::string ph = e.at("ph").get<std::string>();
    EXPECT_EQ(e.at("pid").get<int>(), t.pid);
    if (ph == "M") {
      if (e.at("name") == "thread_name") p.track_names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
      continue;
    }
    EXPECT_EQ(ph, "X") << "only complete events are written";
    Event ev{e.at("name").get<std::string>(), e.at("cat").get<std::string>(), e.at("tid").get<int>(), ns_of(e.at("ts")), 0,
             e.contains("args") ? e.at("args") : json::object()};
    EXPECT_GE(e.at("dur").get<double>(), 0.0) << ev.name;
    ev.end = ev.start + ns_of(e.at("dur"));
    p.events.push_back(std::move(ev));
  }
  for (const Event& e : p.events) EXPECT_TRUE(p.track_names.count(e.tid)) << "track " << e.tid << " of " << e.name << " is not named";
  return p;
}

// Per track, spans either nest (a child inside its parent) or follow each other: never overlap in part.
void expect_nested(const std::vector<Event>& events) {
  std::map<int, std::vector<const Event*>> by_track;
  for (const Event& e : events) by_track[e.tid].push_back(&e);
  for (auto& [tid, list] : by_track) {
    std::sort(list.begin(), list.end(), [](const Event* a, const Event* b) {
      return a->start != b->start ? a->start < b->start : a->end > b->end;
    });
    std::vector<const Event*> open;
    for (const Event* e : list) {
      while (!open.empty() && open.back()->end <= e->start) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e->end, open.back()->end) << e->name << " [" << e->start << ", " << e->end << "] overlaps "
                                            << open.back()->name << " [" << open.back()->start << ", "
                                            << open.back()->end << "] on track " << tid << " without nesting";
      }
      open.push_back(e);
    }
  }
}

std::vector<const Event*> named(const Parsed& p, std::string_view name) {
  std::vector<const Event*> out;
  for (const Event& e : p.events)
    if (e.name == name) out.push_back(&e);
  return out;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A trace started by a test is stopped at its end, whatever happens.
struct Recording {
  explicit Recording(trace::Options o = {}) { EXPECT_TRUE(trace::start(o)); }
  ~Recording() {
    if (trace::enabled()) (void)trace::stop();
  }
};

TEST(TraceRecorder, OffRecordsNothingAndStopWithoutStartIsRefused) {
  ASSERT_FALSE(trace::enabled());
  auto none = trace::stop();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Code::kFailedPrecondition);
  {
    trace::Scope off("off", "test");
    EXPECT_FALSE(off);
    off.arg("k", int64_t{1});
    trace::record("off too", "test", trace::now(), trace::now(), trace::this_thread_track());
  }
  trace::Deferred started_off("started off", "test");
  EXPECT_FALSE(started_off);
  ASSERT_TRUE(trace::start());
  started_off.finish();  // began while off: not recorded
  { trace::Scope on("on", "test"); }
  auto t = trace::stop();
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->spans.size(), 1u);
  EXPECT_EQ(t->spans[0].name, "on");
  EXPECT_FALSE(trace::enabled());
  { trace::Scope after("after", "test"); }
  ASSERT_TRUE(trace::start());
  auto empty = trace::stop();
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->spans.empty()) << "a span after stop() went into the next trace";
}

TEST(TraceRecorder, SecondStartIsRefused) {
  Recording r;
  auto again = trace::start();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(trace::start(trace::Options{.max_spans = 0}));
}

TEST(TraceRecorder, CapKeepsMaxSpansAndCountsTheDropped) {
  ASSERT_TRUE(trace::start({.max_spans = 10}));
  for (int i = 0; i < 25; ++i) trace::Scope s("span", "test");
  auto t = trace::stop();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->spans.size(), 10u);
  EXPECT_EQ(t->dropped_spans, 15u);
  Parsed p = parse_checked(*t);
  EXPECT_EQ(p.other.at("dropped_spans").get<uint64_t>(), 15u);
  EXPECT_EQ(p.other.at("max_spans").get<uint64_t>(), 10u);
  EXPECT_EQ(p.events.size(), 10u);
}

TEST(TraceRecorder, ClockPairAndTimesInMicroseconds) {
  const int64_t before = trace::now();
  Recording r({.process_name = "node a@host"});
  const int64_t at = trace::now();
  trace::record("explicit", "test", at, at + 2'500, trace::named_track("explicit track"),
                std::vector<trace::Arg>{{"bytes", int64_t{64}}, {"ratio", 0.5}, {"who", std::string("a \"quoted\"\n name")}});
  auto t = trace::stop();
  ASSERT_TRUE(t);
  EXPECT_GE(t->clock_monotonic_ns, before);
  EXPECT_LE(t->clock_monotonic_ns, t->stopped_ns);
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  EXPECT_LE(std::llabs(int64_t{real.tv_sec} * 1'000'000'000 + real.tv_nsec - t->clock_realtime_ns), int64_t{60} * 1'000'000'000);
  Parsed p = parse_checked(*t);
  ASSERT_EQ(p.events.size(), 1u);
  EXPECT_EQ(p.events[0].start, at);  // nanoseconds survive the microseconds of the JSON
  EXPECT_EQ(p.events[0].end - p.events[0].start, 2'500);
  EXPECT_EQ(p.events[0].args.at("bytes").get<int64_t>(), 64);
  EXPECT_EQ(p.events[0].args.at("ratio").get<double>(), 0.5);
  EXPECT_EQ(p.events[0].args.at("who").get<std::string>(), "a \"quoted\"\n name");
  EXPECT_EQ(p.track_names.at(p.events[0].tid), "explicit track");
  EXPECT_EQ(p.other.at("clock_realtime_ns").get<int64_t>(), t->clock_realtime_ns);
}

// Threads record at once into their own buffers: nothing lost, each thread's spans on its own named
// track, nested as they were opened. (In scripts/tsan.sh's list.)
TEST(TraceRecorderThreads, ConcurrentThreadsRecordAtOnce) {
  constexpr int kThreads = 8, kEach = 500;
  Recording r;
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  std::vector<int> tids(kThreads);
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      const std::string name = "pb-test-" + std::to_string(i);
      pthread_setname_np(pthread_self(), name.c_str());
      tids[static_cast<size_t>(i)] = static_cast<int>(trace::this_thread_track());
      go.arrive_and_wait();
      for (int k = 0; k < kEach; ++k) {
        trace::Scope outer("outer", "test");
        outer.arg("k", int64_t{k});
        trace::Scope inner("inner", "test");
      }
    });
  for (auto& t : threads) t.join();
  auto t = trace::stop();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->dropped_spans, 0u);
  Parsed p = parse_checked(*t);
  EXPECT_EQ(p.events.size(), size_t{kThreads} * kEach * 2);
  expect_nested(p.events);
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(p.track_names[tids[static_cast<size_t>(i)]], "pb-test-" + std::to_string(i));
}

// A span started on one thread and finished on another, on a named track; spans of one named track
// that overlap in part go to lanes of their own, so every lane nests.
TEST(TraceRecorderThreads, SpansAcrossThreadsAndOverlapsOnNamedTracks) {
  Recording r;
  const trace::Track device = trace::named_track("device 9 (test)");
  EXPECT_EQ(trace::named_track("device 9 (test)"), device);
  trace::Deferred a("a", "device");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  trace::Deferred b("b", "device");  // starts inside a, ends after it
  std::thread([&] { a.finish(device); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread([&] { b.finish(device); }).join();
  auto t = trace::stop();
  ASSERT_TRUE(t);
  Parsed p = parse_checked(*t);
  ASSERT_EQ(p.events.size(), 2u);
  expect_nested(p.events);
  const Event* ea = named(p, "a").at(0);
  const Event* eb = named(p, "b").at(0);
  EXPECT_LT(eb->start, ea->end);
  EXPECT_GT(eb->end, ea->end);
  EXPECT_NE(ea->tid, eb->tid);
  EXPECT_EQ(p.track_names[ea->tid], "device 9 (test)");
  EXPECT_EQ(p.track_names[eb->tid], "device 9 (test) [2]");
}

// Spans are recorded when they end, so on a named track (an Elixir process's, a device's) a parent
// comes after its children: it takes their lane, and a call stack is drawn on one track. A span that
// overlaps the stack in part still gets a lane of its own.
TEST(TraceRecorderThreads, AParentRecordedAfterItsChildrenSharesTheirLane) {
  Recording r;
  const trace::Track process = trace::named_track("elixir stack (test)");
  const int64_t t0 = trace::now();
  trace::record("child 1", "elixir", t0 + 100, t0 + 200, process);
  trace::record("child 2", "elixir", t0 + 300, t0 + 400, process);
  trace::record("parent", "elixir", t0 + 50, t0 + 450, process);
  trace::record("grandparent", "elixir", t0 + 10, t0 + 500, process);
  trace::record("next call", "elixir", t0 + 600, t0 + 700, process);
  trace::record("across", "elixir", t0 + 450, t0 + 650, process);  // overlaps grandparent and next call in part
  auto t = trace::stop();
  ASSERT_TRUE(t);
  Parsed p = parse_checked(*t);
  ASSERT_EQ(p.events.size(), 6u);
  expect_nested(p.events);
  const int stack = named(p, "child 1").at(0)->tid;
  for (const char* name : {"child 2", "parent", "grandparent", "next call"})
    EXPECT_EQ(named(p, name).at(0)->tid, stack) << name;
  EXPECT_EQ(p.track_names[stack], "elixir stack (test)");
  EXPECT_EQ(p.track_names[named(p, "across").at(0)->tid], "elixir stack (test) [2]");
}

// --- A whole run on each real CPU plugin. ---

const char kAdd[] = R"mlir(
module @traced attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir";

const char kCallback[] = R"mlir(
module @traced_callback attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pb_trace_twice(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir";

const char kOrdered[] = R"mlir(
module @traced_ordered attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    stablehlo.custom_call @pb_trace_log(%x) {api_version = 4 : i32, has_side_effect = true} : (tensor<4xf32>) -> ()
    %0 = stablehlo.add %x, %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir";

class TraceOnPlugin : public ::testing::TestWithParam<RealPlugin> {};

// Off, the library's sites record nothing (compile, copies, executions); an execution launched while
// off and finished while on leaves nothing either.
TEST_P(TraceOnPlugin, OffTheLibraryRecordsNothing) {
  ASSERT_FALSE(trace::enabled());
  auto client = testing::make_client(GetParam().path);
  ASSERT_TRUE(client);
  auto program = Program::from_bytes(kAdd, "off.mlir");
  ASSERT_TRUE(program);
  auto exe = client->compile(*program);
  ASSERT_TRUE(exe) << exe.error().to_string();
  std::vector<float> a = {1, 2, 3, 4};
  const std::vector<int64_t> dims = {4};
  auto x = client->buffer_from_host(std::as_bytes(std::span(a)), DType::kF32, dims);
  ASSERT_TRUE(x);
  Buffer* args[] = {&*x, &*x};
  auto run = (*exe)->execute_async(args);
  ASSERT_TRUE(run);
  PB_ASSERT_OK(run->done.await());
  std::vector<float> out(4);
  PB_ASSERT_OK(run->outputs[0].to_host(std::as_writable_bytes(std::span(out))));
  auto launched_off = (*exe)->execute_async(args);
  ASSERT_TRUE(launched_off);
  ASSERT_TRUE(trace::start());
  PB_ASSERT_OK(launched_off->done.await());
  (void)launched_off->done.on_ready([](Status) {});
  auto t = trace::stop();
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->spans.empty()) << t->spans.size() << " span(s), the first " << t->spans[0].name;
}

// An execution's outcome handed on from a callback on its event, and the trace stopped there (what
// a caller does that stops tracing as soon as its result arrives): the execution's span on the
// device's track is in that trace. A plugin may run an event's callbacks in any order, and XLA runs
// the latest registered first, before the span's own callback: the span is ended by whoever hands
// the outcome on (finish_span, as the facade's on_complete and await do). Before that, such a trace
// lost the span (plugboard_nx's traced training step failed now and then in CI).
TEST_P(TraceOnPlugin, AnOutcomeHandedOnFromItsEventFindsTheDeviceSpanRecorded) {
  auto client = testing::make_client(GetParam().path);
  ASSERT_TRUE(client);
  auto program = Program::from_bytes(testing::kMatmul256, "matmul.mlir");
  ASSERT_TRUE(program);
  auto exe = client->compile(*program);
  ASSERT_TRUE(exe) << exe.error().to_string();
  std::vector<float> a(256 * 256, 0.5f);
  const std::vector<int64_t> dims = {256, 256};
  auto x = client->buffer_from_host(std::as_bytes(std::span(a)), DType::kF32, dims);
  ASSERT_TRUE(x);
  Buffer* args[] = {&*x};
  int asynchronous = 0;
  for (int round = 0; round < 8; ++round) {
    Recording recording;  // stopped by the callback below, or at the end of the round on a failure
    auto run = (*exe)->execute_async(args);
    ASSERT_TRUE(run) << run.error().to_string();
    ASSERT_TRUE(run->device_span);
    if (!run->done.is_ready()) ++asynchronous;
    std::latch stopped(1);
    Expected<trace::Trace> t = std::unexpected(Error(Code::kUnknown, "not stopped"));
    PB_ASSERT_OK(run->done.on_ready([&, span = run->device_span](Status s) {
      finish_span(span, s);
      t = trace::stop();
      stopped.count_down();
    }));
    stopped.wait();
    ASSERT_TRUE(t) << t.error().to_string();
    const auto on_device = std::count_if(t->spans.begin(), t->spans.end(), [](const trace::Span& s) {
      return s.name == "execute" && s.category == "device";
    });
    EXPECT_EQ(on_device, 1) << "round " << round;
    PB_ASSERT_OK(run->done.await());
  }
  if (asynchronous == 0) GTEST_SKIP() << "every execution finished inside its launch: the case is not exercised";
}

TEST_P(TraceOnPlugin, RunIsTracedAndTheTraceChecks) {
  const testing::ScratchDir cache_dir;
  Recording r;
  const int64_t wall_start = trace::now();

  select::Candidate c;
  c.name = GetParam().name;
  c.platform = "cpu";
  c.source = "test";
  c.path = GetParam().path;
  select::Selection sel = select::select_target({c}, select::SelectOptions());
  ASSERT_TRUE(sel.client) << sel.status().error().to_string();
  const std::shared_ptr<Client> client = sel.client;

  auto program = Program::from_bytes(kAdd, "traced.mlir");
  ASSERT_TRUE(program);
  compile_cache::CompileSources sources;
  sources.cache.emplace(cache_dir.path());
  auto first = compile_cache::compile(*client, *program, CompileOptions(), sources);  // miss, compile, store
  ASSERT_TRUE(first) << first.error().to_string();
  auto second = compile_cache::compile(*client, *program, CompileOptions(), sources);  // hit
  ASSERT_TRUE(second) << second.error().to_string();
  ASSERT_EQ(second->origin, compile_cache::Origin::kCompileCache);

  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40};
  const std::vector<int64_t> dims = {4};
  auto x = client->buffer_from_host(std::as_bytes(std::span(a)), DType::kF32, dims);
  auto y = client->buffer_from_host(std::as_bytes(std::span(b)), DType::kF32, dims);
  ASSERT_TRUE(x && y);
  Buffer* args[] = {&*x, &*y};

  const int64_t run_start = trace::now();
  auto run = second->executable->execute_async(args);  // launch; completion on the device track
  ASSERT_TRUE(run) << run.error().to_string();
  std::latch delivered(1);
  Status outcome = ok();
  ASSERT_TRUE(run->done.on_ready([&](Status s) {
    deliver_on_pool([&](Status d) { outcome = d, delivered.count_down(); }, std::move(s));
  }));
  delivered.wait();
  ASSERT_TRUE(delivery_pool().await_idle(std::chrono::seconds(30)));  // the delivery's span has ended
  PB_ASSERT_OK(outcome);
  auto sync = first->executable->execute(args);  // execute_into: launch and wait here
  PB_ASSERT_OK(sync);
  std::vector<float> out(4);
  PB_ASSERT_OK(run->outputs[0].to_host(std::as_writable_bytes(std::span(out))));
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
  const int64_t run_end = trace::now();

  // A blocking host callback: its span on the plugin's thread, inside the execution.
  auto receiver = std::make_shared<HostCallbacks>();
  PB_ASSERT_OK(receiver->add_blocking("pb_trace_twice", [](const BlockingCall& call) -> Status {
    std::vector<float> v(4);
    std::memcpy(v.data(), call.operands()[0].bytes.data(), 16);
    for (float& f : v) f *= 2;
    return call.set_result(0, TensorView{DType::kF32, call.operands()[0].dims, std::as_bytes(std::span(v))});
  }));
  PB_ASSERT_OK(declare_callbacks(*client, *receiver));
  auto cb_program = Program::from_bytes(kCallback, "traced_callback.mlir");
  ASSERT_TRUE(cb_program);
  auto cb_exe = client->compile(*cb_program);
  ASSERT_TRUE(cb_exe) << cb_exe.error().to_string();
  Buffer* cb_args[] = {&*x};
  auto cb_out = execute_with_callbacks(**cb_exe, cb_args, receiver);
  PB_ASSERT_OK(cb_out);
  // An ordered host callback: queued on the plugin's thread, run where the receiver's queue runs.
  auto logger = std::make_shared<HostCallbacks>();
  std::atomic<int> logged{0};
  PB_ASSERT_OK(logger->add_ordered("pb_trace_log", [&](const OrderedCall&) -> Status { return ++logged, ok(); }));
  PB_ASSERT_OK(declare_callbacks(*client, *logger));
  auto log_program = Program::from_bytes(kOrdered, "traced_ordered.mlir");
  ASSERT_TRUE(log_program);
  auto log_exe = client->compile(*log_program);
  ASSERT_TRUE(log_exe) << log_exe.error().to_string();
  PB_ASSERT_OK(execute_with_callbacks(**log_exe, cb_args, logger));
  EXPECT_EQ(logged.load(), 1);
  ASSERT_TRUE(delivery_pool().await_idle(std::chrono::seconds(30)));
  const int64_t wall_end = trace::now();

  auto t = trace::stop();
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->dropped_spans, 0u);
  Parsed p = parse_checked(*t);
  expect_nested(p.events);

  // Selection: one span per stage of the candidate, inside the candidate's span, with its outcome.
  ASSERT_EQ(named(p, "candidate").size(), 1u);
  const Event* cand = named(p, "candidate")[0];
  EXPECT_EQ(cand->args.at("verdict"), "chosen");
  EXPECT_EQ(cand->args.at("path"), GetParam().path.string());
  for (const char* stage : {"found", "verified", "probed", "dependencies", "loaded", "initialized", "client", "devices"}) {
    auto spans = named(p, stage);
    ASSERT_EQ(spans.size(), 1u) << stage;
    EXPECT_EQ(spans[0]->args.at("candidate"), GetParam().name) << stage;
    EXPECT_EQ(spans[0]->args.at("outcome"), "passed") << stage;
    EXPECT_EQ(spans[0]->tid, cand->tid) << stage;
    EXPECT_GE(spans[0]->start, cand->start) << stage;
    EXPECT_LE(spans[0]->end, cand->end) << stage;
  }

  // Compile: the plugin's compile, the cache's miss, store and hit (with the load under it).
  EXPECT_EQ(named(p, "compile").size(), 2u);
  EXPECT_GE(named(p, "PJRT_Client_Compile").size(), 2u);  // the add program and the callback program
  std::multiset<std::string> lookups;
  for (const Event* e : named(p, "compile_cache_lookup")) lookups.insert(e->args.at("outcome").get<std::string>());
  EXPECT_EQ(lookups, (std::multiset<std::string>{"hit", "miss"}));
  ASSERT_EQ(named(p, "compile_cache_store").size(), 1u);
  EXPECT_GT(named(p, "compile_cache_store")[0]->args.at("bytes").get<int64_t>(), 0);
  EXPECT_EQ(named(p, "PJRT_Executable_DeserializeAndLoad").size(), 1u);

  // Copies: their bytes, on the calling thread and on the device's track.
  const std::string device_track = "device 0 (" + client->devices()[0].kind + ")";
  int host_copies = 0, device_copies = 0;
  for (const Event* e : named(p, "copy_to_device")) {
    if (e->args.at("bytes").get<int64_t>() != 16) continue;  // declare_callbacks' self-test copies too
    if (e->cat == "device") {
      ++device_copies;
      EXPECT_EQ(p.track_names[e->tid].rfind(device_track, 0), 0u);
    } else {
      ++host_copies;
    }
  }
  EXPECT_GE(host_copies, 2);
  EXPECT_GE(device_copies, 2);
  bool copied_back = false;
  for (const Event* e : named(p, "copy_to_host")) copied_back |= e->args.at("bytes").get<int64_t>() == 16;
  EXPECT_TRUE(copied_back);

  // Executions: launches on the calling thread with the plugin's call inside, each execution on the
  // device track from launch to ready, the delivery on a delivery thread; all inside the run.
  int in_run = 0;
  for (const Event* e : named(p, "launch")) {
    if (e->start < run_start || e->end > run_end) continue;
    EXPECT_EQ(e->args.at("executable"), "traced");
    ++in_run;
  }
  EXPECT_EQ(in_run, 1);  // execute_async's (execute_into's host span is "execute", category "execute")
  int waited = 0;
  for (const Event* e : named(p, "execute")) waited += e->cat == "execute" && e->start >= run_start && e->end <= run_end;
  EXPECT_EQ(waited, 1);
  int calls = 0;
  for (const Event* e : named(p, "PJRT_LoadedExecutable_Execute")) calls += e->start >= run_start && e->end <= run_end;
  EXPECT_EQ(calls, 2);
  int on_device = 0;
  for (const Event* e : named(p, "execute")) {
    if (e->cat != "device") continue;
    EXPECT_EQ(p.track_names[e->tid].rfind(device_track, 0), 0u) << p.track_names[e->tid];
    EXPECT_EQ(e->args.at("status"), "ok");
    // Its end is stamped by the plugin's event callback, which may run after the test's own.
    on_device += e->start >= run_start && e->end <= wall_end && e->args.at("executable") == "traced";
  }
  EXPECT_EQ(on_device, 2);
  int delivered_in_run = 0;
  for (const Event* e : named(p, "deliver")) {
    if (e->start < run_start || e->end > run_end) continue;
    EXPECT_EQ(p.track_names[e->tid], "pb-delivery");
    ++delivered_in_run;
  }
  EXPECT_EQ(delivered_in_run, 1);

  std::vector<const Event*> hooks;  // (the self-test's callback is another target)
  for (const Event* e : named(p, "blocking_callback"))
    if (e->args.at("target") == "pb_trace_twice") hooks.push_back(e);
  ASSERT_EQ(hooks.size(), 1u);
  EXPECT_EQ(hooks[0]->args.at("executable"), "traced_callback");
  EXPECT_GE(hooks[0]->start, run_end);

  int queued = 0, delivered_ordered = 0;
  for (const Event* e : named(p, "ordered_callback_queued")) queued += e->args.at("target") == "pb_trace_log";
  for (const Event* e : named(p, "ordered_callback"))
    delivered_ordered += e->args.at("target") == "pb_trace_log" && e->args.at("sequence") == 0;
  EXPECT_EQ(queued, 1);
  EXPECT_EQ(delivered_ordered, 1);

  for (const Event& e : p.events) {
    EXPECT_GE(e.start, wall_start) << e.name;
    EXPECT_LE(e.end, wall_end) << e.name;
  }
}

// A boot that tries the candidate in a child first: the child's stages ("how": "isolated") and then
// this process's, each once, all inside the candidate's span and nested.
TEST_P(TraceOnPlugin, IsolatedBootTracesTheChildsStagesAndThenItsOwn) {
  Recording r;
  select::Candidate c;
  c.name = GetParam().name;
  c.platform = "cpu";
  c.source = "test";
  c.path = GetParam().path;
  select::SelectOptions options;
  options.isolate = true;
  select::Selection sel = select::select_target({c}, options);
  ASSERT_TRUE(sel.client) << sel.status().error().to_string();
  auto t = trace::stop();
  ASSERT_TRUE(t);
  Parsed p = parse_checked(*t);
  expect_nested(p.events);
  ASSERT_EQ(named(p, "candidate").size(), 1u);
  const Event* cand = named(p, "candidate")[0];
  for (const char* stage : {"loaded", "initialized", "client", "devices"}) {
    std::multiset<std::string> how;
    for (const Event* e : named(p, stage)) {
      how.insert(e->args.at("how").get<std::string>());
      EXPECT_GE(e->start, cand->start) << stage;
      EXPECT_LE(e->end, cand->end) << stage;
    }
    EXPECT_EQ(how, (std::multiset<std::string>{"in process", "isolated"})) << stage;
  }
  EXPECT_EQ(named(p, "verified").size(), 1u);
}

// `plugboard run --trace FILE`: the CLI's run as a trace. CLOCK_MONOTONIC is the machine's, so the
// child's spans fall inside the time this process measured around it.
void check_cli_trace(const std::string& env, const std::filesystem::path& file, bool selection) {
  const std::filesystem::path cases = testing::conformance_dir() / "cases" / "add_f32";
  const std::string command = env + " " + std::string(PLUGBOARD_CLI_PATH) + " run " + (cases / "program.mlir").string() +
                              (selection ? std::string() : " --plugin " + cpu_plugins()[0].path.string()) + " -i " +
                              (cases / "in0.npy").string() + " -i " + (cases / "in1.npy").string() +
                              " --no-compile-cache --trace " + file.string() + " > " + file.string() + ".log 2>&1";
  const int64_t before = trace::now();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const int64_t after = trace::now();
  auto text = read_text(file);
  ASSERT_FALSE(text.empty()) << file;
  auto doc = strict_json::parse(text, file.string());
  ASSERT_TRUE(doc) << doc.error().to_string();
  // The same checks as for a trace recorded here.
  Parsed p;
  for (const json& e : doc->at("traceEvents")) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "thread_name") p.track_names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
      if (e.at("name") == "process_name") {
        EXPECT_EQ(e.at("args").at("name").get<std::string>().rfind("plugboard (pid ", 0), 0u);
      }
      continue;
    }
    ASSERT_EQ(e.at("ph"), "X");
    ASSERT_GE(e.at("dur").get<double>(), 0.0);
    Event ev{e.at("name").get<std::string>(), e.at("cat").get<std::string>(), e.at("tid").get<int>(), ns_of(e.at("ts")), 0,
             e.contains("args") ? e.at("args") : json::object()};
    ev.end = ev.start + ns_of(e.at("dur"));
    p.events.push_back(std::move(ev));
  }
  expect_nested(p.events);
  for (const Event& e : p.events) {
    EXPECT_TRUE(p.track_names.count(e.tid)) << e.name;
    EXPECT_GE(e.start, before) << e.name;
    EXPECT_LE(e.end, after) << e.name;
  }
  ASSERT_EQ(named(p, "plugboard run").size(), 1u);
  const Event* run = named(p, "plugboard run")[0];
  for (const char* name : {"compile", "PJRT_Client_Compile", "PJRT_LoadedExecutable_Execute", "copy_to_device", "copy_to_host"}) {
    ASSERT_FALSE(named(p, name).empty()) << name;
    EXPECT_GE(named(p, name)[0]->start, run->start) << name;
  }
  bool on_device = false;
  for (const Event* e : named(p, "execute")) on_device |= e->cat == "device" && p.track_names[e->tid].rfind("device 0 (", 0) == 0;
  EXPECT_TRUE(on_device);
  for (const Event* e : named(p, "copy_to_device")) EXPECT_EQ(e->args.at("bytes").get<int64_t>(), 128);  // f32[4,8]
  EXPECT_EQ(!named(p, "candidate").empty(), selection);
  if (selection) {  // the chosen candidate's stages, each inside its candidate's span
    const Event* chosen = nullptr;
    for (const Event* e : named(p, "candidate"))
      if (e->args.at("verdict") == "chosen") chosen = e;
    ASSERT_NE(chosen, nullptr);
    for (const char* stage : {"found", "verified", "probed", "dependencies", "loaded", "initialized", "client", "devices"}) {
      int inside = 0;
      for (const Event* e : named(p, stage)) inside += e->start >= chosen->start && e->end <= chosen->end && e->tid == chosen->tid;
      EXPECT_EQ(inside, 1) << stage;
    }
  }
  EXPECT_EQ(doc->at("otherData").at("dropped_spans").get<uint64_t>(), 0u);
}

TEST(TraceCli, RunWithPluginWritesTheTrace) {
  const testing::ScratchDir dir;
  check_cli_trace("", dir / "run.trace.json", /*selection=*/false);
}

TEST(TraceCli, RunThatSelectsATargetTracesItsStages) {
  const testing::ScratchDir dir;
  check_cli_trace("PLUGBOARD_PLUGIN_PATH=" + cpu_plugins()[0].path.string(), dir / "boot.trace.json",
                  /*selection=*/true);
}

TEST(TraceCli, TraceFileThatCannotBeWrittenFailsTheRun) {
  const std::filesystem::path cases = testing::conformance_dir() / "cases" / "add_f32";
  const std::string command = std::string(PLUGBOARD_CLI_PATH) + " run " + (cases / "program.mlir").string() + " --plugin " +
                              cpu_plugins()[0].path.string() + " -i " + (cases / "in0.npy").string() + " -i " +
                              (cases / "in1.npy").string() + " --trace /nonexistent/dir/t.json > /dev/null 2>&1";
  EXPECT_NE(std::system(command.c_str()), 0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, TraceOnPlugin, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace plugboard
