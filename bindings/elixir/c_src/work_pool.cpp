#include "work_pool.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace plugboard::nif {
namespace {

class WorkPool {
 public:
  bool post(std::function<void()> task) noexcept {
    std::unique_lock lock(mutex_);
    try {
      queue_.push_back(std::move(task));
    } catch (...) {
      return false;
    }
    if (idle_ < queue_.size() && threads_ < kMaxThreads) {
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

 private:
  static constexpr size_t kMaxThreads = 64;
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [&] { return !queue_.empty(); });
      --idle_;
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
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  size_t threads_ = 0, idle_ = 0;
};

WorkPool& pool() {
  static WorkPool* p = new WorkPool();  // leaked: its threads outlive static destruction
  return *p;
}

}  // namespace

bool run_off_scheduler(std::function<void()> task) noexcept { return pool().post(std::move(task)); }

}  // namespace plugboard::nif
