// The key-value store of multi-host PJRT: the in-memory store, the store as PJRT_Client_Create's kv
// callbacks (called here exactly as a plugin calls them), and clients of the real CPU plugins made
// with a store and node_id / num_nodes.
#include <gtest/gtest.h>
#include <pjrt_c_api.h>

#include <atomic>
#include <iostream>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "abi/api.h"
#include "distributed/in_memory_key_value_store.h"
#include "distributed/pjrt_key_value.h"
#include "plugboard/deadline.h"
#include "runtime/client.h"
#include "test_env.h"

// What a plugin's PJRT_Error is to this test: the plugin defines the type, so the test, playing the
// plugin, does too.
struct PJRT_Error {
  PJRT_Error_Code code;
  std::string message;
};

namespace plugboard {
namespace {

using distributed::InMemoryKeyValueStore;
using std::chrono::milliseconds;
using testing::cpu_plugins;
using testing::RealPlugin;

using Clock = std::chrono::steady_clock;
long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------------------------
// The in-memory store.

TEST(InMemoryKeyValueStore, TryGetOfAMissingKeyIsNotFoundNamingIt) {
  InMemoryKeyValueStore store;
  auto v = store.try_get("gpu:0");
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code(), Code::kNotFound);
  EXPECT_NE(v.error().message().find("'gpu:0'"), std::string::npos) << v.error().message();
}

TEST(InMemoryKeyValueStore, PutThenGetAndTryGetGiveTheValueBytesIncluded) {
  InMemoryKeyValueStore store;
  const std::string value("a\0b\xff", 4);  // a value is bytes, NULs included
  PB_ASSERT_OK(store.put("k", value));
  auto got = store.get("k", milliseconds(0));
  PB_ASSERT_OK(got);
  EXPECT_EQ(*got, value);
  auto tried = store.try_get("k");
  PB_ASSERT_OK(tried);
  EXPECT_EQ(*tried, value);
  PB_ASSERT_OK(store.put("k", ""));  // a later put replaces; the empty value is a value
  auto replaced = store.try_get("k");
  PB_ASSERT_OK(replaced);
  EXPECT_EQ(*replaced, "");
  EXPECT_FALSE(store.try_get("K"));  // keys are exact
}

TEST(InMemoryKeyValueStore, GetOfAMissingKeyWaitsItsTimeoutThenDeadlineExceeded) {
  InMemoryKeyValueStore store;
  const auto start = Clock::now();
  auto v = store.get("never", milliseconds(200));
  const long long waited = ms_since(start);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code(), Code::kDeadlineExceeded);
  EXPECT_NE(v.error().message().find("'never'"), std::string::npos);
  EXPECT_NE(v.error().message().find("200 ms"), std::string::npos) << v.error().message();
  std::cout << "[ kv ] a 200 ms get of a missing key returned after " << waited << " ms\n";
  EXPECT_GE(waited, 200);
  EXPECT_LT(waited, 1200) << "a 200 ms get took " << waited << " ms";  // bound: a loaded 2-core machine
}

TEST(InMemoryKeyValueStore, ZeroOrNegativeTimeoutLooksOnce) {
  InMemoryKeyValueStore store;
  const auto start = Clock::now();
  auto zero = store.get("x", milliseconds(0));
  auto negative = store.get("x", milliseconds(-5));
  EXPECT_LT(ms_since(start), 200);
  ASSERT_FALSE(zero);
  ASSERT_FALSE(negative);
  EXPECT_EQ(zero.error().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(negative.error().code(), Code::kDeadlineExceeded);
}

TEST(InMemoryKeyValueStore, GetWaitingForALaterPutReturnsWhenItComes) {
  InMemoryKeyValueStore store;
  const auto start = Clock::now();
  std::thread putter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    (void)store.put("late", "here");
  });
  auto v = store.get("late", milliseconds(10000));
  const long long waited = ms_since(start);
  putter.join();
  PB_ASSERT_OK(v);
  EXPECT_EQ(*v, "here");
  EXPECT_GE(waited, 140);
  EXPECT_LT(waited, 5000) << "the get did not wake at the put";
}

TEST(InMemoryKeyValueStoreThreads, ManyGettersWaitingOnOnePutAllGetIt) {
  InMemoryKeyValueStore store;
  constexpr int kGetters = 32;
  std::atomic<int> waiting{0};
  std::vector<std::string> got(kGetters);
  std::vector<std::thread> getters;
  for (int i = 0; i < kGetters; ++i)
    getters.emplace_back([&, i] {
      waiting.fetch_add(1);
      // Odd getters look under another key first: puts of other keys wake them, and they wait on.
      if (i % 2) (void)store.try_get("other");
      auto v = store.get("barrier", milliseconds(20000));
      got[static_cast<size_t>(i)] = v ? *v : "error: " + v.error().to_string();
    });
  while (waiting.load() < kGetters) std::this_thread::yield();
  std::this_thread::sleep_for(milliseconds(50));
  PB_ASSERT_OK(store.put("other", "not it"));
  PB_ASSERT_OK(store.put("barrier", "go"));
  for (auto& t : getters) t.join();
  for (int i = 0; i < kGetters; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], "go") << "getter " << i;
}

TEST(InMemoryKeyValueStoreThreads, ConcurrentPutsAndGetsOfManyKeys) {
  InMemoryKeyValueStore store;
  constexpr int kThreads = 8, kKeys = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < kKeys; ++k) {
        const std::string mine = std::to_string(t) + "/" + std::to_string(k);
        (void)store.put(mine, mine);
        // Read a key of the next thread: present or not yet, never another value.
        const std::string theirs = std::to_string((t + 1) % kThreads) + "/" + std::to_string(k);
        if (auto v = store.try_get(theirs); v && *v != theirs) wrong.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kKeys; k += 37) {
      const std::string key = std::to_string(t) + "/" + std::to_string(k);
      auto v = store.try_get(key);
      PB_ASSERT_OK(v);
      EXPECT_EQ(*v, key);
    }
}

// ---------------------------------------------------------------------------------------------
// The C callbacks, called as a plugin calls them.

PJRT_Error* make_plugin_error(PJRT_Error_Code code, const char* message, size_t size) {
  return new PJRT_Error{code, std::string(message, size)};
}
PJRT_CallbackError plugin_error_maker = &make_plugin_error;

// `key` must outlive the args (a literal, or a string the test keeps).
// timeout_in_ms is an `int` in pjrt_c_api.h: the helper takes exactly that type, so no test narrows
// a wider timeout without saying so (the int64 extremes are tested on KeyValueStore::get itself).
using TimeoutInMs = decltype(PJRT_KeyValueGetCallback_Args::timeout_in_ms);
PJRT_KeyValueGetCallback_Args get_args(KeyValueStore* store, std::string_view key, TimeoutInMs timeout_ms) {
  PJRT_KeyValueGetCallback_Args args{};
  args.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
  args.key = key.data();
  args.key_size = key.size();
  args.timeout_in_ms = timeout_ms;
  args.callback_error = &plugin_error_maker;
  args.user_arg = store;
  return args;
}

// The same for kv_try_get and kv_put (`key` and `value` must outlive the args).
PJRT_KeyValueTryGetCallback_Args try_get_args(KeyValueStore* store, std::string_view key) {
  PJRT_KeyValueTryGetCallback_Args args{};
  args.struct_size = PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE;
  args.key = key.data();
  args.key_size = key.size();
  args.callback_error = &plugin_error_maker;
  args.user_arg = store;
  return args;
}

PJRT_KeyValuePutCallback_Args put_args(KeyValueStore* store, std::string_view key, std::string_view value) {
  PJRT_KeyValuePutCallback_Args args{};
  args.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
  args.key = key.data();
  args.key_size = key.size();
  args.value = value.data();
  args.value_size = value.size();
  args.callback_error = &plugin_error_maker;
  args.user_arg = store;
  return args;
}

TEST(KvCallbacks, PutThenGetHandsOutACopyWithADeleterThatFreesIt) {
  InMemoryKeyValueStore store;
  const std::string key = "node:1/devices", value("x\0y", 3);
  {
    std::string transient = value;  // the value need only live for the call
    auto put = put_args(&store, key, transient);
    EXPECT_EQ(distributed::kv_put_callback(&put), nullptr);
  }
  auto stored = store.try_get(key);
  PB_ASSERT_OK(stored);
  EXPECT_EQ(*stored, value);

  auto get = get_args(&store, key, 1000);
  ASSERT_EQ(distributed::kv_get_callback(&get), nullptr);
  ASSERT_NE(get.value, nullptr);
  EXPECT_EQ(std::string(get.value, get.value_size), value);
  ASSERT_NE(get.value_deleter_callback, nullptr);
  get.value_deleter_callback(get.value);  // the plugin frees through it (ASan: no leak, no mismatch)

  auto try_get = try_get_args(&store, key);
  ASSERT_EQ(distributed::kv_try_get_callback(&try_get), nullptr);
  EXPECT_EQ(std::string(try_get.value, try_get.value_size), value);
  ASSERT_NE(try_get.value_deleter_callback, nullptr);
  try_get.value_deleter_callback(try_get.value);
}

TEST(KvCallbacks, GetHonoursTimeoutInMsAndAnswersDeadlineExceededThroughCallbackError) {
  InMemoryKeyValueStore store;
  auto get = get_args(&store, "missing", 150);
  const auto start = Clock::now();
  PJRT_Error* error = distributed::kv_get_callback(&get);
  const long long waited = ms_since(start);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, PJRT_Error_Code_DEADLINE_EXCEEDED);
  EXPECT_NE(error->message.find("'missing'"), std::string::npos) << error->message;
  EXPECT_EQ(get.value, nullptr);  // nothing handed out with an error
  delete error;
  std::cout << "[ kv ] kv_get with timeout_in_ms=150 answered DEADLINE_EXCEEDED after " << waited << " ms\n";
  EXPECT_GE(waited, 150);
  EXPECT_LT(waited, 1150) << "a 150 ms kv_get took " << waited << " ms";
}

TEST(KvCallbacks, GetWaitsForAPutFromAnotherThread) {
  InMemoryKeyValueStore store;
  std::thread putter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    (void)store.put("later", "v");
  });
  auto get = get_args(&store, "later", 10000);
  PJRT_Error* error = distributed::kv_get_callback(&get);
  putter.join();
  ASSERT_EQ(error, nullptr) << error->message;
  EXPECT_EQ(std::string(get.value, get.value_size), "v");
  get.value_deleter_callback(get.value);
}

// A timeout's extremes. Through the KeyValueStore interface (std::chrono::milliseconds, int64) a
// caller may pass milliseconds::max() for "forever": it waits for the put that comes rather than
// overflowing into a deadline in the past; the minimum and zero look once. PJRT's timeout_in_ms is
// an `int` (pjrt_c_api.h): its extremes, through the callback, behave the same.
void expect_extremes_behave(KeyValueStore& store, const std::string& key, milliseconds forever, milliseconds least) {
  std::thread putter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    (void)store.put(key, "came");
  });
  auto got = store.get(key, forever);
  putter.join();
  ASSERT_TRUE(got) << "a get with timeout " << forever.count() << " ms failed at once: " << got.error().to_string();
  EXPECT_EQ(*got, "came");
  for (milliseconds timeout : {least, milliseconds(0)}) {
    const auto start = Clock::now();
    auto missing = store.get(key + "-missing", timeout);
    EXPECT_LT(ms_since(start), 500) << "timeout " << timeout.count() << " ms did not look once";
    ASSERT_FALSE(missing) << timeout.count();
    EXPECT_EQ(missing.error().code(), Code::kDeadlineExceeded) << timeout.count();
    auto present = store.get(key, timeout);
    ASSERT_TRUE(present) << timeout.count();
    EXPECT_EQ(*present, "came");
  }
}

TEST(InMemoryKeyValueStore, GetWithTheInt64ExtremesAndZero) {
  InMemoryKeyValueStore store;
  expect_extremes_behave(store, "forever", milliseconds::max(), milliseconds::min());
}

TEST(KvCallbacks, GetWithTheIntExtremesOfTimeoutInMsAndZero) {
  InMemoryKeyValueStore store;
  std::thread putter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    (void)store.put("forever", "came");
  });
  auto forever = get_args(&store, "forever", std::numeric_limits<TimeoutInMs>::max());
  PJRT_Error* error = distributed::kv_get_callback(&forever);
  putter.join();
  ASSERT_EQ(error, nullptr) << "a kv_get with timeout_in_ms=INT_MAX failed at once: " << error->message;
  EXPECT_EQ(std::string(forever.value, forever.value_size), "came");
  forever.value_deleter_callback(forever.value);
  for (TimeoutInMs timeout : {std::numeric_limits<TimeoutInMs>::min(), TimeoutInMs{0}}) {
    const auto start = Clock::now();
    auto missing = get_args(&store, "missing", timeout);
    PJRT_Error* late = distributed::kv_get_callback(&missing);
    EXPECT_LT(ms_since(start), 500) << "timeout_in_ms=" << timeout << " did not look once";
    ASSERT_NE(late, nullptr) << timeout;
    EXPECT_EQ(late->code, PJRT_Error_Code_DEADLINE_EXCEEDED) << timeout;
    delete late;
  }
}

// The arithmetic under every store's deadline (plugboard/deadline.h): saturating, never wrapping.
TEST(Deadline, AdditionSaturatesAndFarDeadlinesAreNone) {
  constexpr auto kMax = milliseconds(std::numeric_limits<int64_t>::max());
  constexpr auto kMin = milliseconds(std::numeric_limits<int64_t>::min());
  EXPECT_EQ(saturating_add(kMax, milliseconds(10000)), kMax);
  EXPECT_EQ(saturating_add(kMin, milliseconds(-1)), kMin);
  EXPECT_EQ(saturating_add(kMax, kMin), milliseconds(-1));
  EXPECT_EQ(saturating_add(milliseconds(5), milliseconds(7)), milliseconds(12));
  const auto now = Clock::now();
  EXPECT_EQ(deadline_after(now, kMax), std::nullopt);
  EXPECT_EQ(deadline_after(now, kMin), now);
  EXPECT_EQ(deadline_after(now, milliseconds(0)), now);
  EXPECT_EQ(deadline_after(now, milliseconds(250)), now + milliseconds(250));
}

TEST(KvCallbacks, TryGetOfAMissingKeyIsNotFound) {
  InMemoryKeyValueStore store;
  auto args = try_get_args(&store, "nope");
  PJRT_Error* error = distributed::kv_try_get_callback(&args);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, PJRT_Error_Code_NOT_FOUND);
  EXPECT_EQ(args.value, nullptr);
  delete error;
}

TEST(KvCallbacks, NoStoreInUserArgIsFailedPrecondition) {
  auto get = get_args(nullptr, "k", 10);
  PJRT_Error* error = distributed::kv_get_callback(&get);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, PJRT_Error_Code_FAILED_PRECONDITION);
  EXPECT_NE(error->message.find("kv_get_callback"), std::string::npos) << error->message;
  delete error;
}

// A store whose every call fails with a code of its own: the code reaches the plugin unchanged.
class FailingStore final : public KeyValueStore {
 public:
  Expected<std::string> get(std::string_view, milliseconds) noexcept override {
    return make_error(Code::kUnavailable, "leader gone");
  }
  Expected<std::string> try_get(std::string_view) noexcept override { return make_error(Code::kUnavailable, "leader gone"); }
  Status put(std::string_view, std::string_view) noexcept override { return make_error(Code::kUnavailable, "leader gone"); }
};

TEST(KvCallbacks, AStoreErrorReachesThePluginWithItsCodeAndMessage) {
  FailingStore store;
  auto get = get_args(&store, "k", 10);
  PJRT_Error* error = distributed::kv_get_callback(&get);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, PJRT_Error_Code_UNAVAILABLE);
  EXPECT_NE(error->message.find("leader gone"), std::string::npos);
  delete error;
  auto put = put_args(&store, "k", "v");
  error = distributed::kv_put_callback(&put);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, PJRT_Error_Code_UNAVAILABLE);
  delete error;
}

TEST(KvCallbacks, AttachSetsTryGetOnlyForPluginsThatHaveIt) {
  InMemoryKeyValueStore store;
  auto args = PB_PJRT_ARGS(PJRT_Client_Create_Args);
  distributed::attach_key_value_store(args, &store, distributed::kKvTryGetMinor);
  EXPECT_EQ(args.kv_get_callback, &distributed::kv_get_callback);
  EXPECT_EQ(args.kv_get_user_arg, &store);
  EXPECT_EQ(args.kv_put_callback, &distributed::kv_put_callback);
  EXPECT_EQ(args.kv_put_user_arg, &store);
  EXPECT_EQ(args.kv_try_get_callback, &distributed::kv_try_get_callback);
  EXPECT_EQ(args.kv_try_get_user_arg, &store);

  auto old = PB_PJRT_ARGS(PJRT_Client_Create_Args);  // a PJRT 0.60 plugin: its struct ends at `client`
  distributed::attach_key_value_store(old, &store, distributed::kKvTryGetMinor - 1);
  EXPECT_EQ(old.kv_get_callback, &distributed::kv_get_callback);
  EXPECT_EQ(old.kv_try_get_callback, nullptr);
  EXPECT_EQ(old.kv_try_get_user_arg, nullptr);

  auto short_struct = PB_PJRT_ARGS(PJRT_Client_Create_Args);
  short_struct.struct_size = offsetof(PJRT_Client_Create_Args, client) + sizeof(void*);
  distributed::attach_key_value_store(short_struct, &store, 81);
  EXPECT_EQ(short_struct.kv_try_get_callback, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Clients of the real CPU plugins with a store and node_id / num_nodes.

// Counts the calls the plugin makes, passing them to an in-memory store.
class CountingStore final : public KeyValueStore {
 public:
  Expected<std::string> get(std::string_view key, milliseconds timeout) noexcept override {
    gets.fetch_add(1);
    return inner.get(key, timeout);
  }
  Expected<std::string> try_get(std::string_view key) noexcept override {
    try_gets.fetch_add(1);
    return inner.try_get(key);
  }
  Status put(std::string_view key, std::string_view value) noexcept override {
    puts.fetch_add(1);
    return inner.put(key, value);
  }
  std::atomic<int> gets{0}, try_gets{0}, puts{0};
  InMemoryKeyValueStore inner;
};

class KvClientTest : public ::testing::TestWithParam<RealPlugin> {};

TEST_P(KvClientTest, ClientWithAStoreIsCreatedAndKeepsTheStoreForItsLife) {
  auto plugin = load_plugin(GetParam().path);
  PB_ASSERT_OK(plugin);
  auto store = std::make_shared<CountingStore>();
  ClientOptions options;
  options.kv_store = store;
  auto client = Client::create(*plugin, options);
  PB_ASSERT_OK(client);
  options.kv_store.reset();
  EXPECT_EQ((*client)->platform_name(), "cpu");
  EXPECT_FALSE((*client)->devices().empty());
  EXPECT_EQ(store.use_count(), 2);  // this test's and the client's
  // A single-process CPU client exchanges nothing through the store (these CPU builds have no
  // multi-process collectives configured).
  EXPECT_EQ(store->gets.load() + store->try_gets.load() + store->puts.load(), 0);
  client->reset();
  EXPECT_EQ(store.use_count(), 1);  // let go with the plugin's client
}

TEST_P(KvClientTest, NodeIdAndNumNodesReachThePluginAsCreateOptions) {
  // What each CPU plugin does with node_id=0 / num_nodes=1 (the CUDA plugin's option names): 0.81
  // and 0.106 take any option name (and ignore these); 0.115 checks names and refuses them (its CPU
  // client knows cpu_device_count, process_id, collectives...): the plugin's own error comes back.
  auto plugin = load_plugin(GetParam().path);
  PB_ASSERT_OK(plugin);
  auto store = std::make_shared<CountingStore>();
  ClientOptions options;
  options.kv_store = store;
  options.node_id = 0;
  options.num_nodes = 1;
  auto client = Client::create(*plugin, options);
  const bool checks_names = GetParam().pjrt_minor >= 115;
  std::cout << "[ kv ] " << GetParam().name << " with node_id=0 num_nodes=1: "
            << (client ? "created" : client.error().to_string()) << "; store calls: " << store->gets.load() << " get, "
            << store->try_gets.load() << " try_get, " << store->puts.load() << " put\n";
  if (checks_names) {
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error().code(), Code::kInvalidArgument);
    // It names the first name it does not know, in its map's order (either of the two).
    const std::string& message = client.error().message();
    EXPECT_TRUE(message.find("node_id") != std::string::npos || message.find("num_nodes") != std::string::npos)
        << client.error().to_string();
    EXPECT_EQ(store.use_count(), 2);  // nothing kept by a client that was never made
  } else {
    PB_ASSERT_OK(client);
    EXPECT_FALSE((*client)->devices().empty());
  }
  EXPECT_EQ(store->puts.load(), 0);
}

TEST_P(KvClientTest, NodeOptionsAreCheckedBeforeThePluginSeesThem) {
  auto plugin = load_plugin(GetParam().path);
  PB_ASSERT_OK(plugin);
  ClientOptions outside;
  outside.node_id = 2;
  outside.num_nodes = 2;
  auto refused = Client::create(*plugin, outside);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("node_id 2"), std::string::npos) << refused.error().to_string();

  ClientOptions zero_nodes;
  zero_nodes.num_nodes = 0;
  auto none = Client::create(*plugin, zero_nodes);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("num_nodes"), std::string::npos);

  ClientOptions twice;
  twice.create_options.push_back({"node_id", int64_t{0}});
  twice.node_id = 0;
  auto doubled = Client::create(*plugin, twice);
  ASSERT_FALSE(doubled);
  EXPECT_NE(doubled.error().message().find("'node_id' given twice"), std::string::npos) << doubled.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, KvClientTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace plugboard
