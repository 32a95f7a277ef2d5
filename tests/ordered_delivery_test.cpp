// The queue that delivers ordered callbacks, on its own (no plugin): order, one task at a time,
// delivery with and without a waiter, and being released from inside a task. Threaded: also run
// under TSan (scripts/tsan.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "callback/ordered_delivery.h"

namespace plugboard {
namespace {

TEST(OrderedDelivery, TasksRunInPostOrderAndAllBeforeWaitForReturns) {
  OrderedDelivery d;
  std::vector<int> seen;  // touched by one task at a time only
  d.begin_execution();
  uint64_t last = 0;
  for (int i = 0; i < 10000; ++i) last = d.post([&seen, i] { seen.push_back(i); });
  d.wait_for(last);
  d.end_execution();
  ASSERT_EQ(seen.size(), 10000u);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i);
}

TEST(OrderedDelivery, TheDeliveryThreadRunsTasksNobodyWaitsFor) {
  OrderedDelivery d;
  std::atomic<int> ran{0};
  d.post([&] { ++ran; });  // no execution in flight: the sleeping thread is woken
  for (int i = 0; i < 2000 && ran.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 1);
  d.begin_execution();  // in flight: the thread polls, nobody notifies
  d.post([&] { ++ran; });
  for (int i = 0; i < 2000 && ran.load() == 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 2);
  d.end_execution();
}

TEST(OrderedDelivery, ManyPostersAndWaitersNeverRunTwoTasksAtOnce) {
  OrderedDelivery d;
  std::atomic<int> running{0}, overlaps{0}, total{0};
  std::mutex m;
  std::vector<std::vector<int>> per_thread(4);
  auto poster = [&](int t) {
    d.begin_execution();
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
    d.end_execution();
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
  // The last owner goes away inside a task: the thread detaches and ends on its own.
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

}  // namespace
}  // namespace plugboard
