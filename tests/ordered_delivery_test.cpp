// The queue that delivers ordered callbacks, on its own (no plugin): order, one task at a time,
// delivery with and without a waiter, being released from inside a task, and many queues sharing
// the bounded delivery pool. Threaded: also run under TSan (scripts/tsan.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "callback/ordered_delivery.h"

namespace plugboard {
namespace {

TEST(OrderedDelivery, TasksRunInPostOrderAndAllBeforeWaitForReturns) {
  OrderedDelivery d;
  std::vector<int> seen;  // touched by one task at a time only
  uint64_t last = 0;
  for (int i = 0; i < 10000; ++i) last = d.post([&seen, i] { seen.push_back(i); });
  d.wait_for(last);
  EXPECT_EQ(d.finished_ticket(), last);
  ASSERT_EQ(seen.size(), 10000u);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i);
}

// What a process about to exit waits for (api::await_deliveries): a task queued or running on the
// delivery pool, a release of the last reference to a plugin object among them, is awaited.
TEST(OrderedDelivery, AwaitIdleWaitsForQueuedAndRunningDeliveryTasks) {
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::atomic<bool> released{false};
  for (int i = 0; i < 3; ++i) delivery_pool().post([gate] { gate.wait(); });
  delivery_pool().post([&released, gate] {
    gate.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a slow teardown
    released = true;
  });
  EXPECT_FALSE(delivery_pool().await_idle(std::chrono::milliseconds(20)));
  go.set_value();
  EXPECT_TRUE(delivery_pool().await_idle(std::chrono::seconds(10)));
  EXPECT_TRUE(released.load());
}

TEST(OrderedDelivery, TheDeliveryThreadRunsTasksNobodyWaitsFor) {
  OrderedDelivery d;
  std::atomic<int> ran{0};
  d.post([&] { ++ran; });  // a sleeping pool thread is woken: nothing polls
  for (int i = 0; i < 2000 && ran.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 1);
  d.post([&] { ++ran; });
  for (int i = 0; i < 2000 && ran.load() == 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 2);
}

TEST(OrderedDelivery, ManyPostersAndWaitersNeverRunTwoTasksAtOnce) {
  OrderedDelivery d;
  std::atomic<int> running{0}, overlaps{0}, total{0};
  std::mutex m;
  std::vector<std::vector<int>> per_thread(4);
  auto poster = [&](int t) {
    for (int i = 0; i < 2000; ++i) {
      const uint64_t ticket = d.post([&, t, i] {
        if (running.fetch_add(1) != 0) ++overlaps;
        per_thread[static_cast<size_t>(t)].push_back(i);
        ++total;
        running.fetch_sub(1);
      });
      if (i % 97 == 0) d.wait_for(ticket);
    }
    d.wait_for(d.last_ticket());
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(poster, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(total.load(), 8000);
  for (const auto& v : per_thread) {
    ASSERT_EQ(v.size(), 2000u);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i);  // each poster's own order
  }
}

TEST(OrderedDelivery, WaitingFromInsideATaskReturnsAndTheLastOwnerMayLetGoInOne) {
  auto d = std::make_shared<OrderedDelivery>();
  std::atomic<bool> inner_returned{false};
  std::atomic<bool> done{false};
  d->post([&, raw = d.get()] {
    raw->wait_for(raw->last_ticket() + 100);  // would deadlock if it waited
    inner_returned = true;
  });
  // The last owner goes away inside a task: the queue's state lives until the task has returned.
  std::weak_ptr<OrderedDelivery> weak = d;
  d->post([&done, owner = d]() mutable {
    owner.reset();
    done = true;
  });
  d.reset();  // the task above now holds the only reference
  for (int i = 0; i < 2000 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(inner_returned.load());
  EXPECT_TRUE(done.load());
  for (int i = 0; i < 2000 && !weak.expired(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(weak.expired());
}

// A thousand receivers, each with its own ordered stream, on the few threads of the shared pool:
// every stream arrives whole and in order, no two tasks of one receiver overlap, and the pool never
// grows past its bound (the old design started one thread per receiver).
TEST(OrderedDelivery, AThousandQueuesShareTheBoundedPoolAndEachKeepsItsOrder) {
  constexpr int kQueues = 1000, kTasks = 50;
  struct Receiver {
    OrderedDelivery queue;
    std::vector<int> seen;
    std::atomic<int> running{0};
    std::atomic<int> overlaps{0};
  };
  std::vector<std::unique_ptr<Receiver>> receivers;
  for (int r = 0; r < kQueues; ++r) receivers.push_back(std::make_unique<Receiver>());
  // Posted interleaved from two threads, as plugin threads would.
  auto post_half = [&](int parity) {
    for (int i = 0; i < kTasks; ++i)
      for (int r = parity; r < kQueues; r += 2) {
        Receiver* rec = receivers[static_cast<size_t>(r)].get();
        rec->queue.post([rec, i] {
          if (rec->running.fetch_add(1) != 0) ++rec->overlaps;
          rec->seen.push_back(i);
          rec->running.fetch_sub(1);
        });
      }
  };
  std::thread a(post_half, 0), b(post_half, 1);
  a.join();
  b.join();
  for (auto& rec : receivers) rec->queue.wait_for(static_cast<uint64_t>(kTasks));
  for (auto& rec : receivers) {
    EXPECT_EQ(rec->overlaps.load(), 0);
    ASSERT_EQ(rec->seen.size(), static_cast<size_t>(kTasks));
    for (int i = 0; i < kTasks; ++i) ASSERT_EQ(rec->seen[static_cast<size_t>(i)], i);
  }
  EXPECT_LE(delivery_pool().started_threads(), delivery_pool().max_threads());
  EXPECT_LE(delivery_pool().max_threads(), 8u);
}

// A waiter runs a queue that no pool thread has reached yet instead of sleeping: with every pool
// thread held by other receivers' slow tasks, waiting for a fresh queue still finishes at once.
TEST(OrderedDelivery, AWaiterRunsItsQueueWhenEveryPoolThreadIsBusy) {
  std::atomic<bool> release{false};
  std::vector<std::unique_ptr<OrderedDelivery>> busy;
  for (size_t i = 0; i < delivery_pool().max_threads(); ++i) {
    busy.push_back(std::make_unique<OrderedDelivery>());
    busy.back()->post([&] {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  // The busy tasks end when the test does, whatever happens in it.
  struct Release {
    std::atomic<bool>& flag;
    ~Release() { flag = true; }
  } guard{release};
  auto mine = std::make_shared<OrderedDelivery>();
  auto ran = std::make_shared<std::atomic<int>>(0);
  const uint64_t ticket = mine->post([ran] { ++*ran; });
  // In another thread, with a time limit: a regression fails the test instead of hanging it.
  auto waited = std::async(std::launch::async, [mine, ticket] { mine->wait_for(ticket); });
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(ran->load(), 1);
  release = true;
  for (auto& q : busy) q->wait_for(1);
}

TEST(ThreadPool, StartsThreadsOnDemandUpToItsBound) {
  ThreadPool pool("pb-test", 3);
  EXPECT_EQ(pool.started_threads(), 0u);
  std::atomic<int> ran{0};
  std::atomic<bool> on_worker{false};
  for (int i = 0; i < 100; ++i)
    pool.post([&] {
      if (pool.on_worker()) on_worker = true;
      ++ran;
    });
  for (int i = 0; i < 5000 && ran.load() < 100; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 100);
  EXPECT_TRUE(on_worker.load());
  EXPECT_FALSE(pool.on_worker());
  EXPECT_GE(pool.started_threads(), 1u);
  EXPECT_LE(pool.started_threads(), 3u);
}

}  // namespace
}  // namespace plugboard
