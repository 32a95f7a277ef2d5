// The embedding API (include/plugboard/plugboard.h) as an embedder meets it: this binary includes
// the facade only and links libplugboard.so, nothing of the layers. On the three real CPU plugins:
// discover without loading, boot, compile (also asynchronously), execute with completion reported
// on a delivery thread, host callbacks, a thousand receivers on a bounded number of threads, an
// execution dropped unfinished from another thread, devices, callback introspection, and donation
// of adopted memory. Threaded: also run under TSan (scripts/tsan.sh).
#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "alloc_sweep.h"
#include "plugboard/plugboard.h"
#include "plugboard/trace.h"
#include "real_plugins.h"
#include "test_programs.h"

namespace plugboard::api {
namespace {

namespace fs = std::filesystem;
using plugboard::testing::cpu_plugins;
using plugboard::testing::RealPlugin;
using namespace std::chrono_literals;

constexpr char kAdd[] = R"mlir(
module @add attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir";

// Three ordered calls (threaded by a token) around one blocking call.
constexpr char kCallbacks[] = R"mlir(
module @facade_callbacks attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %t0 = stablehlo.after_all : !stablehlo.token
    %t1 = stablehlo.custom_call @facade.log(%t0, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    %t2, %y = stablehlo.custom_call @facade.twice(%t1, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
    %t3 = stablehlo.custom_call @facade.log(%t2, %y) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    %t4 = stablehlo.custom_call @facade.log(%t3, %y) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    return %y : tensor<4xf32>
  }
}
)mlir";

// The same calls beside a 32x32 matrix product: XLA's CPU client runs a program of under 1,000
// flops inline inside Execute, and this one has 65,536, so Execute returns while the program is
// still running (inside its blocking callback).
constexpr char kHeavyCallbacks[] = R"mlir(
module @facade_heavy_callbacks attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>, %m: tensor<32x32xf32>) -> (tensor<4xf32>, tensor<32x32xf32>) {
    %d = "stablehlo.dot"(%m, %m) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %t0 = stablehlo.after_all : !stablehlo.token
    %t1 = stablehlo.custom_call @facade.log(%t0, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    %t2, %y = stablehlo.custom_call @facade.twice(%t1, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
    %t3 = stablehlo.custom_call @facade.log(%t2, %y) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    %t4 = stablehlo.custom_call @facade.log(%t3, %y) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    return %y, %d : tensor<4xf32>, tensor<32x32xf32>
  }
}
)mlir";

const int64_t kDims4[] = {4};

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }

std::vector<float> floats(const Buffer& b) {
  std::vector<float> out(b.byte_size() / sizeof(float));
  EXPECT_TRUE(b.to_host(std::as_writable_bytes(std::span(out))));
  return out;
}

size_t thread_count() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

bool mapped(const fs::path& path) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(path.string()) != std::string::npos) return true;
  return false;
}

// A blocking function that doubles its f32 operand.
Status twice(const BlockingCall& call) {
  const TensorView& in = call.operands()[0];
  std::vector<float> v(in.bytes.size() / sizeof(float));
  std::memcpy(v.data(), in.bytes.data(), in.bytes.size());
  for (float& f : v) f *= 2;
  return call.set_result(0, TensorView{DType::kF32, in.dims, std::as_bytes(std::span(v))});
}

class FacadeTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    auto opened = Client::open(GetParam().path);
    ASSERT_TRUE(opened) << opened.error().to_string();
    client_ = *opened;
  }

  Executable compile(const char* text) {
    auto program = Program::from_bytes(text, "facade_test.mlir");
    EXPECT_TRUE(program) << program.error().to_string();
    auto exe = client_->compile(*program);
    EXPECT_TRUE(exe) << exe.error().to_string();
    return std::move(*exe);
  }

  Buffer device_array(const std::vector<float>& v, int device = 0) {
    auto b = client_->copy_to_device(bytes_of(v), DType::kF32, kDims4, device);
    EXPECT_TRUE(b) << b.error().to_string();
    return std::move(*b);
  }

  std::shared_ptr<const Client> client_;
};

TEST_P(FacadeTest, ExecuteReportsCompletionOnADeliveryThreadWithoutAWaitingThread) {
  Executable exe = compile(kAdd);
  Buffer a = device_array({1, 2, 3, 4}), b = device_array({10, 20, 30, 40});
  Buffer* args[] = {&a, &b};
  auto run = exe.execute(args);
  ASSERT_TRUE(run) << run.error().to_string();
  std::promise<std::thread::id> where;
  std::promise<Status> outcome;
  ASSERT_TRUE(run->on_complete([&](Status s) {
    where.set_value(std::this_thread::get_id());
    outcome.set_value(std::move(s));
  }));
  auto done = outcome.get_future();
  ASSERT_EQ(done.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(done.get());
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  ASSERT_EQ(run->outputs().size(), 1u);
  EXPECT_EQ(floats(run->outputs()[0]), (std::vector<float>{11, 22, 33, 44}));
  // A second on_complete is refused; await() after completion returns the same outcome.
  EXPECT_EQ(run->on_complete([](Status) {}).error().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(run->await());
}

// A trace stopped as soon as an execution's outcome arrives, through on_complete's function or
// await(), holds the execution's span on the device's track (the NIF stops a trace that way: the
// span is ended before the outcome is handed on, whatever order the plugin runs its callbacks in).
TEST_P(FacadeTest, ATraceStoppedAsTheOutcomeArrivesHasTheDeviceSpan) {
  Executable exe = compile(testing::kMatmul256);
  const std::vector<float> ones(256 * 256, 0.5f);
  const int64_t square[] = {256, 256};
  auto matrix = client_->copy_to_device(bytes_of(ones), DType::kF32, square);
  ASSERT_TRUE(matrix) << matrix.error().to_string();
  Buffer* args[] = {&*matrix};
  auto device_spans = [](const plugboard::trace::Trace& t) {
    return std::count_if(t.spans.begin(), t.spans.end(),
                         [](const plugboard::trace::Span& s) { return s.name == "execute" && s.category == "device"; });
  };
  for (int round = 0; round < 6; ++round) {
    const bool through_on_complete = round % 2 == 0;
    ASSERT_TRUE(plugboard::trace::start());
    auto run = exe.execute(args);
    ASSERT_TRUE(run) << run.error().to_string();
    Expected<plugboard::trace::Trace> t = std::unexpected(Error(Code::kUnknown, "not stopped"));
    if (through_on_complete) {
      std::promise<void> stopped;
      ASSERT_TRUE(run->on_complete([&](Status) {
        t = plugboard::trace::stop();
        stopped.set_value();
      }));
      stopped.get_future().wait();
    } else {
      EXPECT_TRUE(run->await());
      t = plugboard::trace::stop();
    }
    ASSERT_TRUE(t) << t.error().to_string();
    EXPECT_EQ(device_spans(*t), 1) << "round " << round << (through_on_complete ? " (on_complete)" : " (await)");
  }
}

// Traces as an embedder (the Elixir NIF) reaches them: plugboard/trace.h, exported by libplugboard.so.
TEST_P(FacadeTest, TraceOfAnExecutionThroughTheLibrary) {
  Executable exe = compile(kAdd);
  ASSERT_TRUE(plugboard::trace::start({.process_name = "facade"}));
  const int64_t t0 = plugboard::trace::now();
  Buffer a = device_array({1, 2, 3, 4}), b = device_array({10, 20, 30, 40});
  Buffer* args[] = {&a, &b};
  auto run = exe.execute(args);
  ASSERT_TRUE(run) << run.error().to_string();
  std::promise<Status> outcome;
  ASSERT_TRUE(run->on_complete([&](Status s) { outcome.set_value(std::move(s)); }));
  EXPECT_TRUE(outcome.get_future().get());
  ASSERT_TRUE(await_deliveries(30s));
  const plugboard::trace::Track mine = plugboard::trace::named_track("facade test");
  plugboard::trace::record("binding span", "binding", t0, plugboard::trace::now(), mine, {});
  auto t = plugboard::trace::stop();
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->process_name, "facade");
  std::map<int, std::string> tracks;
  for (const auto& track : t->tracks) tracks[track.tid] = track.name;
  int launches = 0, on_device = 0, copies = 0, deliveries = 0, binding = 0;
  for (const auto& span : t->spans) {
    launches += span.name == "launch";
    on_device += span.name == "execute" && span.category == "device" && tracks[span.tid] == "device 0 (cpu)";
    copies += span.name == "copy_to_device" && span.category == "transfer";
    deliveries += span.name == "deliver";
    binding += span.name == "binding span" && tracks[span.tid] == "facade test";
  }
  EXPECT_EQ(launches, 1);
  EXPECT_EQ(on_device, 1);
  EXPECT_EQ(copies, 2);
  EXPECT_GE(deliveries, 1);
  EXPECT_EQ(binding, 1);
  auto text = t->to_json();
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("\"traceEvents\""), std::string::npos);
}

TEST_P(FacadeTest, OnCompleteAfterTheExecutionFinishedStillRunsOnADeliveryThread) {
  Executable exe = compile(kAdd);
  Buffer a = device_array({1, 2, 3, 4}), b = device_array({1, 1, 1, 1});
  Buffer* args[] = {&a, &b};
  auto run = exe.execute(args);
  ASSERT_TRUE(run);
  ASSERT_TRUE(run->await());
  EXPECT_TRUE(run->finished());  // await() would return at once
  Execution moved = std::move(*run);
  EXPECT_FALSE(run->finished());
  EXPECT_TRUE(moved.finished());
  *run = std::move(moved);
  std::promise<std::thread::id> where;
  ASSERT_TRUE(run->on_complete([&](Status) { where.set_value(std::this_thread::get_id()); }));
  auto f = where.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

// One compile pool per process: a binding's own compile work (post_compile_work) runs on the
// threads compile_async uses, never on the caller's.
std::string thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

TEST_P(FacadeTest, PostCompileWorkRunsOnTheCompileThreadsCompileAsyncUses) {
  std::promise<std::pair<std::thread::id, std::string>> posted;
  ASSERT_TRUE(post_compile_work([&] { posted.set_value({std::this_thread::get_id(), thread_name()}); }));
  auto p = posted.get_future();
  ASSERT_EQ(p.wait_for(60s), std::future_status::ready);
  auto [posted_on, posted_name] = p.get();
  EXPECT_NE(posted_on, std::this_thread::get_id());
  EXPECT_EQ(posted_name, "pb-compile");

  auto program = Program::from_bytes(kAdd, "add.mlir");
  ASSERT_TRUE(program);
  std::promise<std::string> compiled_on;
  ASSERT_TRUE(client_->compile_async(*program, {}, [&](Expected<Executable>) { compiled_on.set_value(thread_name()); }));
  auto c = compiled_on.get_future();
  ASSERT_EQ(c.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(c.get(), posted_name);
  EXPECT_FALSE(post_compile_work({}));  // nothing to run
}

TEST_P(FacadeTest, CompileAsyncHandsTheExecutableToAnotherThread) {
  auto program = Program::from_bytes(kAdd, "add.mlir");
  ASSERT_TRUE(program);
  std::promise<Expected<Executable>> result;
  std::promise<std::thread::id> where;
  ASSERT_TRUE(client_->compile_async(*program, {}, [&](Expected<Executable> e) {
    where.set_value(std::this_thread::get_id());
    result.set_value(std::move(e));
  }));
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  auto exe = f.get();
  ASSERT_TRUE(exe) << exe.error().to_string();
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  ASSERT_EQ(exe->parameters().size(), 2u);
  EXPECT_EQ(exe->parameters()[0].to_string(), "f32[4]");
  // A broken program's error arrives the same way.
  auto bad = Program::from_bytes("module { this is not mlir", "bad.mlir");
  ASSERT_TRUE(bad);
  std::promise<Expected<Executable>> failed;
  ASSERT_TRUE(client_->compile_async(*bad, {}, [&](Expected<Executable> e) { failed.set_value(std::move(e)); }));
  auto g = failed.get_future();
  ASSERT_EQ(g.wait_for(60s), std::future_status::ready);
  auto refused = g.get();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().to_string().find("bad.mlir"), std::string::npos) << refused.error().to_string();
}

TEST_P(FacadeTest, CallbacksAreDeliveredInOrderBeforeOnCompleteAndIntrospectionNamesThem) {
  auto receiver = HostCallbacks::create();
  ASSERT_TRUE(receiver);
  std::vector<std::vector<float>> logged;  // one delivery at a time: no lock needed
  ASSERT_TRUE(receiver->add_ordered("facade.log", [&](const OrderedCall& call) -> Status {
    std::vector<float> v(call.operands[0].data.size() / sizeof(float));
    std::memcpy(v.data(), call.operands[0].data.data(), call.operands[0].data.size());
    logged.push_back(std::move(v));
    return ok();
  }));
  ASSERT_TRUE(receiver->add_blocking("facade.twice", twice));
  ASSERT_TRUE(client_->declare_callbacks(*receiver));
  Executable exe = compile(kCallbacks);

  auto targets = exe.custom_call_targets();
  if (exe.parameters_known()) {
    ASSERT_TRUE(targets.has_value());
    EXPECT_NE(std::find(targets->begin(), targets->end(), "facade.log"), targets->end());
    auto needed = exe.host_callbacks_needed();
    std::sort(needed.begin(), needed.end());
    EXPECT_EQ(needed, (std::vector<std::string>{"facade.log", "facade.twice"}));
    auto empty = HostCallbacks::create();
    ASSERT_TRUE(empty);
    auto refused = exe.check_receiver(*empty);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), Code::kNotFound);
    EXPECT_NE(refused.error().message().find("facade.twice"), std::string::npos) << refused.error().message();
    EXPECT_TRUE(exe.check_receiver(*receiver));
  }

  Buffer x = device_array({1, 2, 3, 4});
  Buffer* args[] = {&x};
  ExecuteOptions options;
  options.callbacks = *receiver;
  auto run = exe.execute(args, options);
  ASSERT_TRUE(run) << run.error().to_string();
  std::promise<size_t> logged_at_completion;
  ASSERT_TRUE(run->on_complete([&](Status s) {
    EXPECT_TRUE(s) << s.error().to_string();
    logged_at_completion.set_value(logged.size());
  }));
  auto f = logged_at_completion.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(f.get(), 3u);
  ASSERT_EQ(logged.size(), 3u);
  EXPECT_EQ(logged[0], (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(logged[1], (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(floats(run->outputs()[0]), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(run->ordered_calls(), 3u);
  EXPECT_EQ(run->blocking_calls(), 1u);
}

// One receiver per request, as a binding with one process per caller would have: 1,000 executions,
// each with its own receiver, started from 4 threads, all in flight together. Every receiver gets
// its three calls in order, every completion arrives, and the process's thread count stays bounded
// (a thread per receiver would add a thousand).
TEST_P(FacadeTest, AThousandConcurrentReceiversOnABoundedNumberOfThreads) {
  constexpr int kReceivers = 1000, kStarters = 4;
  auto probe_receiver = HostCallbacks::create();
  ASSERT_TRUE(probe_receiver);
  ASSERT_TRUE(probe_receiver->add_ordered("facade.log", [](const OrderedCall&) { return ok(); }));
  ASSERT_TRUE(probe_receiver->add_blocking("facade.twice", twice));
  ASSERT_TRUE(client_->declare_callbacks(*probe_receiver));
  // Not cheap for XLA's CPU client: the executions run on the plugin's threads, in flight together.
  Executable exe = compile(kHeavyCallbacks);
  const std::vector<float> ones(32 * 32, 1.0f);
  const int64_t square[] = {32, 32};
  auto matrix = client_->copy_to_device(bytes_of(ones), DType::kF32, square);
  ASSERT_TRUE(matrix) << matrix.error().to_string();
  const size_t threads_before = thread_count();

  struct Request {
    std::optional<HostCallbacks> receiver;
    std::vector<uint64_t> sequences;  // one delivery at a time per receiver
    std::atomic<int> in_flight{0}, overlaps{0};
    std::optional<Execution> run;
    Buffer x;
  };
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < kReceivers; ++i) {
    auto r = std::make_unique<Request>();
    auto made = HostCallbacks::create();
    ASSERT_TRUE(made);
    r->receiver = std::move(*made);
    Request* raw = r.get();
    ASSERT_TRUE(r->receiver->add_ordered("facade.log", [raw](const OrderedCall& call) -> Status {
      if (raw->in_flight.fetch_add(1) != 0) ++raw->overlaps;
      raw->sequences.push_back(call.sequence);
      raw->in_flight.fetch_sub(1);
      return ok();
    }));
    ASSERT_TRUE(r->receiver->add_blocking("facade.twice", twice));
    r->x = device_array({float(i), 1, 2, 3});
    requests.push_back(std::move(r));
  }

  std::mutex m;
  std::condition_variable cv;
  int completed = 0, failed = 0;
  size_t max_threads = 0;
  auto start = [&](int first) {
    for (int i = first; i < kReceivers; i += kStarters) {
      Request& r = *requests[static_cast<size_t>(i)];
      Buffer* args[] = {&r.x, &*matrix};
      ExecuteOptions options;
      options.callbacks = r.receiver;
      auto run = exe.execute(args, options);
      if (!run) {
        std::lock_guard lock(m);
        ++failed, ++completed;
        cv.notify_all();
        continue;
      }
      Status asked = run->on_complete([&](Status s) {
        std::lock_guard lock(m);
        if (!s) ++failed;
        ++completed;
        max_threads = std::max(max_threads, thread_count());
        cv.notify_all();
      });
      r.run.emplace(std::move(*run));
      if (!asked) {
        std::lock_guard lock(m);
        ++failed, ++completed;
        cv.notify_all();
      }
    }
  };
  std::vector<std::thread> starters;
  for (int t = 0; t < kStarters; ++t) starters.emplace_back(start, t);
  for (auto& t : starters) t.join();
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, 300s, [&] { return completed == kReceivers; })) << completed << " completed";
  }
  EXPECT_EQ(failed, 0);
  ASSERT_EQ(failed, 0);
  for (auto& r : requests) {
    EXPECT_EQ(r->overlaps.load(), 0);
    ASSERT_EQ(r->sequences, (std::vector<uint64_t>{0, 1, 2}));
    ASSERT_TRUE(r->run.has_value());
    EXPECT_EQ(floats(r->run->outputs()[0])[1], 2.0f);
  }
  // The delivery pool (at most 8) and the starters are all that was added to the plugin's own.
  EXPECT_LT(max_threads, threads_before + 8 + kStarters + 1) << "threads before: " << threads_before;
  std::printf("%d receivers in flight: %zu threads before, at most %zu while they ran\n", kReceivers,
              threads_before, max_threads);
}

// A binding drops an execution whose program is still running (its caller went away) on another
// thread than the one that started it: the drop returns at once, and the execution still finishes,
// delivers its ordered calls and runs its on_complete.
TEST_P(FacadeTest, AnUnfinishedExecutionDroppedFromAnotherThreadNeverBlocksIt) {
  // Shared with the callbacks, which may outlive this test body when an assertion ends it early.
  struct Sync {
    std::mutex m;
    std::condition_variable cv;
    bool release = false, entered = false, returned = false;
    std::atomic<int> logged{0};
    std::promise<Status> completion;
  };
  auto sync = std::make_shared<Sync>();
  auto receiver = HostCallbacks::create();
  ASSERT_TRUE(receiver);
  ASSERT_TRUE(receiver->add_ordered("facade.log", [sync](const OrderedCall&) {
    ++sync->logged;
    return ok();
  }));
  ASSERT_TRUE(receiver->add_blocking("facade.twice", [sync](const BlockingCall& call) {
    std::unique_lock lock(sync->m);
    sync->entered = true;
    sync->cv.notify_all();
    // Bounded, so that a plugin that ran the program inside Execute fails the test instead of hanging.
    sync->cv.wait_for(lock, 20s, [&] { return sync->release; });
    sync->returned = true;
    return twice(call);
  }));
  ASSERT_TRUE(client_->declare_callbacks(*receiver));
  Executable exe = compile(kHeavyCallbacks);
  Buffer x = device_array({1, 2, 3, 4});
  const std::vector<float> ones(32 * 32, 1.0f);
  const int64_t square[] = {32, 32};
  auto matrix = client_->copy_to_device(bytes_of(ones), DType::kF32, square);
  ASSERT_TRUE(matrix) << matrix.error().to_string();
  Buffer* args[] = {&x, &*matrix};
  ExecuteOptions options;
  options.callbacks = *receiver;
  auto run = exe.execute(args, options);
  ASSERT_TRUE(run) << run.error().to_string();
  {
    std::lock_guard lock(sync->m);
    ASSERT_FALSE(sync->returned) << "the plugin ran the whole program inside Execute";
  }
  ASSERT_TRUE(run->on_complete([sync](Status s) { sync->completion.set_value(std::move(s)); }));
  {
    std::unique_lock lock(sync->m);
    ASSERT_TRUE(sync->cv.wait_for(lock, 30s, [&] { return sync->entered; }));  // inside the callback
  }
  EXPECT_FALSE(run->finished()) << "held in a blocking callback";
  std::chrono::steady_clock::duration drop_took{};
  // The test lets go of the program as well, so that the execution's state is its last owner when
  // the plugin finishes (what a binding's garbage collector does): it must then be released on a
  // delivery thread, not inside the plugin's event callback.
  { Executable gone = std::move(exe); }
  std::thread dropper([&, r = std::move(*run)]() mutable {
    const auto t0 = std::chrono::steady_clock::now();
    { Execution gone = std::move(r); }
    drop_took = std::chrono::steady_clock::now() - t0;
  });
  dropper.join();  // returns while the program is still held in the callback
  EXPECT_LT(drop_took, 1s);
  bool still_inside;
  {
    std::lock_guard lock(sync->m);
    still_inside = !sync->returned;
    sync->release = true;
  }
  EXPECT_TRUE(still_inside);
  sync->cv.notify_all();
  auto f = sync->completion.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.get());
  EXPECT_EQ(sync->logged.load(), 3);
}

// A program that keeps device 0 busy for seconds: %n rounds of a 256x256 matrix product (never
// "cheap" for XLA's CPU client, so Execute returns while it runs and later executions on the device
// queue behind it, as behind a host callback that does not answer).
constexpr char kBusy[] = R"mlir(
module @facade_busy attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%n: tensor<i64>, %m: tensor<256x256xf32>) -> tensor<256x256xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i64>
    %c1 = stablehlo.constant dense<1> : tensor<i64>
    %r:2 = stablehlo.while(%i = %c0, %a = %m) : tensor<i64>, tensor<256x256xf32>
      cond {
        %lt = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %d = "stablehlo.dot"(%a, %m) : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
        %j = stablehlo.add %i, %c1 : tensor<i64>
        stablehlo.return %j, %d : tensor<i64>, tensor<256x256xf32>
      }
    return %r#1 : tensor<256x256xf32>
  }
}
)mlir";

// The first host-callback declaration on a plugin runs plugboard's self-test. Run there, it was an
// execution on the declaring client's device 0, queued behind whatever that device had in flight (a
// callback that does not answer: up to callback_timeout), so declaring (and the compile after it)
// waited for it. The self-test now runs when the client is opened, before anything else can run on
// it: declaring in a fresh process while device 0 is busy takes no longer than the compile.
TEST_P(FacadeTest, FirstCallbackDeclarationDoesNotWaitForTheDevicesWork) {
  Executable busy = compile(kBusy);
  const std::vector<float> small(256 * 256, 1e-3f);
  const int64_t square[] = {256, 256};
  auto matrix = client_->copy_to_device(bytes_of(small), DType::kF32, square);
  ASSERT_TRUE(matrix) << matrix.error().to_string();
  const int64_t rounds[] = {10000};
  auto n = client_->copy_to_device(std::as_bytes(std::span(rounds)), DType::kI64, std::span<const int64_t>{});
  ASSERT_TRUE(n) << n.error().to_string();
  Buffer* args[] = {&*n, &*matrix};
  const auto t0 = std::chrono::steady_clock::now();
  auto run = busy.execute(args);
  ASSERT_TRUE(run) << run.error().to_string();
  ASSERT_FALSE(run->finished()) << "the busy program ran inside Execute";

  const auto d0 = std::chrono::steady_clock::now();
  auto receiver = HostCallbacks::create();
  ASSERT_TRUE(receiver);
  ASSERT_TRUE(receiver->add_blocking("facade.twice", twice));
  ASSERT_TRUE(receiver->add_ordered("facade.log", [](const OrderedCall&) { return ok(); }));
  auto declared = client_->declare_callbacks(*receiver);
  ASSERT_TRUE(declared) << declared.error().to_string();
  Executable with_callbacks = compile(kCallbacks);
  const auto declare_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - d0).count();

  ASSERT_TRUE(run->await());
  const auto busy_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GT(busy_ms, 1500) << "the busy program was too short to show anything";
  EXPECT_LT(declare_ms, busy_ms / 3) << "declaring callbacks and compiling took " << declare_ms
                                     << " ms while device 0 was busy for " << busy_ms << " ms";
}

TEST_P(FacadeTest, ImmutableAdoptedMemoryRefusesDonationAndMutableMemoryAllowsIt) {
  Executable exe = compile(kAdd);
  struct alignas(64) Block {
    float v[4];
  };
  auto immutable = std::make_shared<Block>(Block{{1, 2, 3, 4}});
  auto mutable_block = std::make_shared<Block>(Block{{5, 6, 7, 8}});
  auto view = client_->adopt(std::as_bytes(std::span(immutable->v)), immutable, HostMemory::kImmutable, DType::kF32, kDims4);
  ASSERT_TRUE(view) << view.error().to_string();
  auto given = client_->adopt(std::as_bytes(std::span(mutable_block->v)), mutable_block, HostMemory::kMutable,
                              DType::kF32, kDims4);
  ASSERT_TRUE(given) << given.error().to_string();
  EXPECT_FALSE(view->donatable());
  EXPECT_TRUE(given->donatable());

  Buffer* args[] = {&*view, &*given};
  ExecuteOptions donate_view;
  donate_view.donate = {0};
  auto refused = exe.execute(args, donate_view);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("immutable"), std::string::npos) << refused.error().message();
  EXPECT_TRUE(view->valid());

  ExecuteOptions donate_given;
  donate_given.donate = {1};
  auto run = exe.execute(args, donate_given);
  ASSERT_TRUE(run) << run.error().to_string();
  ASSERT_TRUE(run->await());
  EXPECT_FALSE(given->valid());
  EXPECT_EQ(floats(run->outputs()[0]), (std::vector<float>{6, 8, 10, 12}));
  EXPECT_EQ(std::vector<float>(immutable->v, immutable->v + 4), (std::vector<float>{1, 2, 3, 4}));
  // Every use of the donated buffer says it was donated (a moved-from one, that it is empty).
  auto read = given->to_host();
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(read.error().message().find("f32[4] buffer was donated"), std::string::npos) << read.error().message();
  auto address = given->device_pointer();
  ASSERT_FALSE(address);
  EXPECT_NE(address.error().message().find("was donated"), std::string::npos) << address.error().message();
  auto again = exe.execute(args);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message().find("argument 1 of"), std::string::npos) << again.error().message();
  EXPECT_NE(again.error().message().find("(f32[4]) was donated to an earlier execution"), std::string::npos)
      << again.error().message();
  Buffer moved = std::move(*view);
  auto empty = view->to_host();
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message().find("donated"), std::string::npos) << empty.error().message();
}

TEST_P(FacadeTest, ABuffersDevicePointerViewedAsABufferReadsItsBytes) {
  const std::vector<float> data = {1, 2, 3, 4};
  auto source = client_->copy_to_device(bytes_of(data), DType::kF32, kDims4);
  ASSERT_TRUE(source) << source.error().to_string();
  auto address = source->device_pointer();
  ASSERT_TRUE(address) << address.error().to_string();
  auto released = std::make_shared<std::atomic<int>>(0);
  {
    auto view = client_->view_of_device_memory(*address, DType::kF32, kDims4, 0, [released] { ++*released; });
    ASSERT_TRUE(view) << view.error().to_string();
    EXPECT_FALSE(view->donatable());
    EXPECT_EQ(floats(*view), data);
    Executable exe = compile(kAdd);
    Buffer* args[] = {&*view, &*source};
    auto run = exe.execute(args);
    ASSERT_TRUE(run) << run.error().to_string();
    ASSERT_TRUE(run->await());
    EXPECT_EQ(floats(run->outputs()[0]), (std::vector<float>{2, 4, 6, 8}));
    EXPECT_EQ(released->load(), 0);
  }
  // The plugin may let go of the memory a little later, on its own thread.
  for (int i = 0; i < 1000 && released->load() == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(released->load(), 1);
  Buffer empty;
  auto none = empty.device_pointer();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Code::kFailedPrecondition);
}

TEST_P(FacadeTest, APortableProgramRunsOnAChosenDevice) {
  auto opened = Client::open(GetParam().path, {{"cpu_device_count", int64_t{4}}});
  ASSERT_TRUE(opened) << opened.error().to_string();
  std::shared_ptr<const Client> four = *opened;
  const std::vector<Device> devices = four->devices();
  ASSERT_EQ(devices.size(), 4u);
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].index, static_cast<int>(i));
    EXPECT_FALSE(devices[i].kind.empty());
  }
  auto program = Program::from_bytes(kAdd, "add.mlir");
  ASSERT_TRUE(program);
  CompileOptions portable;
  portable.portable = true;
  auto exe = four->compile(*program, portable);
  ASSERT_TRUE(exe) << exe.error().to_string();
  const std::vector<float> one{1, 2, 3, 4};
  auto a = four->copy_to_device(bytes_of(one), DType::kF32, kDims4, 2);
  auto b = four->copy_to_device(bytes_of(one), DType::kF32, kDims4, 2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->device(), 2);
  Buffer* args[] = {&*a, &*b};
  ExecuteOptions on_two;
  on_two.device = 2;
  auto run = exe->execute(args, on_two);
  ASSERT_TRUE(run) << run.error().to_string();
  ASSERT_TRUE(run->await());
  EXPECT_EQ(run->outputs()[0].device(), 2);
  EXPECT_EQ(floats(run->outputs()[0]), (std::vector<float>{2, 4, 6, 8}));
  // A portable program runs on device 0 as well (it has no device assignment: it is always launched
  // on a named device, the default one included).
  const std::vector<float> two{2, 2, 2, 2};
  auto c = four->copy_to_device(bytes_of(two), DType::kF32, kDims4, 0);
  auto d = four->copy_to_device(bytes_of(two), DType::kF32, kDims4, 0);
  ASSERT_TRUE(c && d);
  Buffer* on_zero_args[] = {&*c, &*d};
  auto on_zero = exe->execute(on_zero_args);
  ASSERT_TRUE(on_zero) << on_zero.error().to_string();
  ASSERT_TRUE(on_zero->await());
  EXPECT_EQ(on_zero->outputs()[0].device(), 0);
  EXPECT_EQ(floats(on_zero->outputs()[0]), (std::vector<float>{4, 4, 4, 4}));
  // Arguments on another device than the execution's are refused by name.
  ExecuteOptions on_one;
  on_one.device = 1;
  auto refused = exe->execute(args, on_one);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("argument 0"), std::string::npos) << refused.error().message();
  ExecuteOptions out_of_range;
  out_of_range.device = 9;
  EXPECT_EQ(exe->execute(args, out_of_range).error().code(), Code::kInvalidArgument);
}

// x: f32[4] split over two devices (GSPMD); returns 2x (split as x is) and the sum of all of x.
constexpr char kSplit[] = R"mlir(
module @split attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32> {mhlo.sharding = "{devices=[2]0,1}"}) -> (tensor<4xf32>, tensor<f32>) {
    %two = stablehlo.constant dense<2.0> : tensor<4xf32>
    %y = stablehlo.multiply %x, %two : tensor<4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = "stablehlo.reduce"(%x, %zero) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %t : tensor<f32>
    }) : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    return %y, %s : tensor<4xf32>, tensor<f32>
  }
}
)mlir";

TEST_P(FacadeTest, AnSpmdProgramRunsOnItsDevicesAtOnce) {
  auto opened = Client::open(GetParam().path, {{"cpu_device_count", int64_t{4}}});
  ASSERT_TRUE(opened) << opened.error().to_string();
  std::shared_ptr<const Client> four = *opened;
  auto program = Program::from_bytes(kSplit, "split.mlir");
  ASSERT_TRUE(program);
  CompileOptions spmd;
  spmd.num_partitions = 2;
  spmd.partitioner = Partitioner::kGspmd;
  spmd.devices = {2, 0};
  auto exe = four->compile(*program, spmd);
  ASSERT_TRUE(exe) << exe.error().to_string();
  EXPECT_EQ(exe->devices(), (std::vector<int>{2, 0}));
  const int64_t two[] = {2};
  const std::vector<float> first{1, 2}, second{3, 4};
  auto a = four->copy_to_device(bytes_of(first), DType::kF32, two, 2);
  auto b = four->copy_to_device(bytes_of(second), DType::kF32, two, 0);
  ASSERT_TRUE(a && b);
  std::vector<std::vector<Buffer*>> lists = {{&*a}, {&*b}};
  auto runs = exe->execute_partitioned(lists);
  ASSERT_TRUE(runs) << runs.error().to_string();
  ASSERT_EQ(runs->size(), 2u);
  for (Execution& run : *runs) ASSERT_TRUE(run.await());
  EXPECT_EQ((*runs)[0].outputs()[0].device(), 2);
  EXPECT_EQ((*runs)[1].outputs()[0].device(), 0);
  EXPECT_EQ(floats((*runs)[0].outputs()[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(floats((*runs)[1].outputs()[0]), (std::vector<float>{6, 8}));
  EXPECT_EQ(floats((*runs)[0].outputs()[1]), (std::vector<float>{10}));
  EXPECT_EQ(floats((*runs)[1].outputs()[1]), (std::vector<float>{10}));
  // Host callbacks do not cross devices; a device index out of range is named.
  auto receiver = HostCallbacks::create();
  ASSERT_TRUE(receiver);
  ExecuteOptions with_callbacks;
  with_callbacks.callbacks = *receiver;
  EXPECT_EQ(exe->execute_partitioned(lists, with_callbacks).error().code(), Code::kInvalidArgument);
  spmd.devices = {0, 9};
  auto refused = four->compile(*program, spmd);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("device 9"), std::string::npos) << refused.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, FacadeTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

// discover() reaches no plugin: a fresh copy of a real plugin, named through JAX's variable, is
// listed as usable with the stages before loading, and is not mapped into the process; boot()
// then starts it.
TEST(FacadeSelection, DiscoverListsWithoutLoadingAndBootStarts) {
  char dir_template[] = "/tmp/plugboard-facade-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const fs::path dir = dir_template;
  const fs::path copy = dir / "discover_copy_cpu.so";
  fs::copy_file(cpu_plugins()[0].path, copy);
  ASSERT_EQ(::setenv("PJRT_NAMES_AND_LIBRARY_PATHS", ("cpu:" + copy.string()).c_str(), 1), 0);

  auto report = discover();
  ASSERT_TRUE(report) << report.error().to_string();
  ASSERT_EQ(report->candidates.size(), 1u) << report->text;
  const CandidateReport& c = report->candidates[0];
  EXPECT_EQ(c.verdict, "usable") << report->text;
  EXPECT_FALSE(report->chosen.has_value());
  std::vector<std::string> stages;
  for (const auto& s : c.stages) stages.push_back(s.stage);
  EXPECT_EQ(stages, (std::vector<std::string>{"found", "verified", "probed", "dependencies"}));
  EXPECT_FALSE(mapped(copy)) << "discover() loaded the plugin";

  auto booted = boot();
  ASSERT_TRUE(booted) << booted.error().to_string();
  ASSERT_TRUE(booted->status) << booted->status.error().to_string();
  ASSERT_TRUE(booted->client);
  EXPECT_EQ(booted->client->platform(), "cpu");
  ASSERT_TRUE(booted->report.chosen.has_value());
  EXPECT_EQ(booted->report.candidates[*booted->report.chosen].verdict, "chosen");
  EXPECT_TRUE(mapped(copy));

  // An explicit target that is not there: the boot fails with the reason, the report says why.
  SelectionSettings missing;
  missing.target = "rocm7";
  auto none = boot(missing);
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_FALSE(none->client);
  ASSERT_FALSE(none->status);
  EXPECT_NE(none->status.error().to_string().find("rocm7"), std::string::npos) << none->status.error().to_string();
  ::unsetenv("PJRT_NAMES_AND_LIBRARY_PATHS");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(FacadeSelection, MalformedSettingsAreErrorsNamingTheVariable) {
  ASSERT_EQ(::setenv("PLUGBOARD_PROBES", "maybe", 1), 0);
  auto report = discover();
  ::unsetenv("PLUGBOARD_PROBES");
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().to_string().find("PLUGBOARD_PROBES"), std::string::npos) << report.error().to_string();
}

// Nothing throws across the facade, even when an allocation fails anywhere inside it (plugboard's
// own code only: discover never reaches a plugin, and Client::open runs the fault plugin, which is
// C and allocates nothing through operator new).
TEST(FacadeNoThrow, EveryAllocationFailureComesBackAsAnError) {
  using plugboard::testing::disarm;
  using plugboard::testing::sweep;
  // The arguments are built (and allocated) by the test before the window is armed again: the
  // sweep is of the library's allocations.
  long n1 = 0;
  auto r1 = sweep([&] {
    disarm();
    std::string text = kAdd, name = "add.mlir";
    plugboard::testing::rearm(++n1);
    auto p = Program::from_bytes(std::move(text), std::move(name));
    disarm();
    return p.has_value();
  });
  EXPECT_GT(r1.calls, 1);
  long n2 = 0;
  auto r2 = sweep([&] {
    disarm();
    std::string name = "facade.log";
    OrderedFunction fn = [](const OrderedCall&) { return plugboard::ok(); };
    plugboard::testing::rearm(++n2);
    auto receiver = HostCallbacks::create();
    bool ok = receiver && receiver->add_ordered(std::move(name), std::move(fn));
    disarm();
    return ok;
  });
  EXPECT_GT(r2.calls, 1);

  char dir_template[] = "/tmp/plugboard-facade-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const fs::path dir = dir_template;
  const fs::path copy = dir / "sweep_copy_cpu.so";
  fs::copy_file(cpu_plugins()[0].path, copy);
  ASSERT_EQ(::setenv("PJRT_NAMES_AND_LIBRARY_PATHS", ("cpu:" + copy.string()).c_str(), 1), 0);
  auto r3 = sweep([] {
    auto report = discover();
    disarm();
    return report.has_value();
  });
  EXPECT_GT(r3.calls, 10);
  ::unsetenv("PJRT_NAMES_AND_LIBRARY_PATHS");

  // Client::open on a fresh copy of the fault plugin each call (a plugin refused once mapped stays
  // refused); the copy is the test's work, so the window is armed again after it.
  long copies = 0;
  auto r4 = sweep([&] {
    disarm();
    const fs::path fault = dir / ("fault_copy_" + std::to_string(++copies) + ".so");
    fs::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, fault);
    plugboard::testing::rearm(copies);
    auto opened = Client::open(fault);
    disarm();
    return opened.has_value();
  });
  EXPECT_GT(r4.calls, 10);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace plugboard::api
