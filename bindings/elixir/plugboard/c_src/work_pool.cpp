#include "work_pool.h"

#include <thread>

namespace plugboard::nif {

bool WorkPool::post(std::function<void()> task) noexcept {
  std::unique_lock lock(mutex_);
  try {
    queue_.push_back(std::move(task));
  } catch (...) {
    return false;
  }
  if (idle_ < queue_.size() && threads_ < limits_.max_threads) {
    try {
      std::thread(&WorkPool::work, this).detach();
      ++threads_;
    } catch (...) {
      if (threads_ == 0) {  // nobody would ever run it
        queue_.pop_back();
        return false;
      }
    }
  }
  lock.unlock();
  ready_.notify_one();
  return true;
}

WorkPool::Counts WorkPool::counts() noexcept {
  std::lock_guard lock(mutex_);
  return {threads_, idle_, queue_.size()};
}

void WorkPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    const bool has_work = ready_.wait_for(lock, limits_.retire_after, [&] { return !queue_.empty(); });
    --idle_;
    if (!has_work) {
      if (threads_ > limits_.kept_idle) {
        --threads_;
        return;
      }
      continue;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (...) {
      // A task reports its own outcome by message; nothing to throw to here.
    }
    task = nullptr;
    lock.lock();
  }
}

// Leaked: its threads outlive static destruction.
WorkPool& launch_pool() {
  // Bounded only against runaway growth: each thread beyond the ones working is one waiting on
  // something (a callback's answer, a long program the plugin runs inline).
  static WorkPool* pool = new WorkPool({.max_threads = 16384, .kept_idle = 4, .retire_after = std::chrono::seconds(10)});
  return *pool;
}

}  // namespace plugboard::nif
