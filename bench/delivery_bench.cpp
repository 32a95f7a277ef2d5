// Ordered-callback delivery as receivers grow (issue 16): 1 to 10,000 receivers (OrderedDelivery
// queues, one per receiving process or caller) on the shared delivery pool. One producer thread, as
// a plugin's thread would, posts to the receivers in turn. Reports the median and 99th-percentile
// latency of one task (post to start), the rate of a burst, and the resident memory each idle
// receiver costs.
//
//   delivery_bench [--tasks N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "callback/ordered_delivery.h"

namespace {
using Clock = std::chrono::steady_clock;

// Resident set size of this process, from /proc/self/statm (pages), in bytes.
long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tasks = 200'000;
  if (argc == 3 && std::strcmp(argv[1], "--tasks") == 0) tasks = std::atoll(argv[2]);
  std::printf(" ordered delivery vs receivers: %lld tasks posted round-robin by one producer thread\n",
              static_cast<long long>(tasks));
  std::printf("   %10s %14s %14s %14s %16s\n", "receivers", "median us", "p99 us", "tasks/s", "bytes/receiver");
  for (int receivers : {1, 10, 100, 1000, 10000}) {
    const long before = resident_bytes();
    std::vector<std::unique_ptr<plugboard::OrderedDelivery>> queues;
    queues.reserve(static_cast<size_t>(receivers));
    for (int r = 0; r < receivers; ++r) queues.push_back(std::make_unique<plugboard::OrderedDelivery>());
    const long idle = resident_bytes() - before;

    // Latency: one task at a time (the next posted once the last has run), to receiver i % R.
    const int pings = 2000;
    std::vector<double> waited(pings);
    for (int i = 0; i < pings; ++i) {
      std::atomic<bool> ran{false};
      const auto posted = Clock::now();
      queues[static_cast<size_t>(i % receivers)]->post([&waited, &ran, posted, i] {
        waited[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(Clock::now() - posted).count();
        ran.store(true, std::memory_order_release);
      });
      while (!ran.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    // Throughput: a burst of `tasks`, round-robin, until all have run.
    std::atomic<int64_t> done{0};
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < tasks; ++i)
      queues[static_cast<size_t>(i % receivers)]->post([&done] { done.fetch_add(1, std::memory_order_relaxed); });
    while (done.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("   %10d %14.2f %14.2f %14.0f %16.0f\n", receivers, percentile(waited, 0.5), percentile(waited, 0.99),
                static_cast<double>(tasks) / seconds, static_cast<double>(idle) / receivers);
  }
  std::printf("   latency: post -> the task starts, one task in flight at a time (2,000 of them); tasks/s: a burst\n"
              "   posted round-robin, until every task has run; bytes/receiver: resident memory the idle queues add\n");
  return 0;
}
