#include "base/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace plugboard {

namespace {
thread_local const void* t_worker_of = nullptr;  // the pool State whose worker this thread is
}

struct ThreadPool::State {
  std::string name;
  size_t max_threads = 1;
  mutable std::mutex mutex;
  std::condition_variable work;
  mutable std::condition_variable settled;  // no task queued or running any more (await_idle)
  std::deque<std::function<void()>> queue;
  std::vector<std::thread> threads;
  size_t idle = 0;  // workers waiting for work
  size_t running = 0;  // tasks being run
  bool stopping = false;

  void run() {
    t_worker_of = this;
    std::unique_lock lock(mutex);
    for (;;) {
      if (!queue.empty()) {
        auto task = std::move(queue.front());
        queue.pop_front();
        ++running;
        lock.unlock();
        task();
        task = nullptr;  // its captures are released outside the lock
        lock.lock();
        if (--running == 0 && queue.empty()) settled.notify_all();
        continue;
      }
      if (stopping) return;
      ++idle;
      work.wait(lock);
      --idle;
    }
  }
};

ThreadPool::ThreadPool(std::string name, size_t threads) : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  state_->max_threads = std::max<size_t>(threads, 1);
}

ThreadPool::~ThreadPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    threads = std::move(state_->threads);
  }
  state_->work.notify_all();
  for (auto& t : threads) t.join();
}

void ThreadPool::post(std::function<void()>&& task) {
  bool wake = false;
  {
    std::lock_guard lock(state_->mutex);
    state_->queue.push_back(std::move(task));
    wake = state_->idle > 0;
    // More tasks waiting than idle workers to take them: one more worker, while under the limit.
    if (state_->queue.size() > state_->idle && state_->threads.size() < state_->max_threads) {
      State* s = state_.get();
      try {
        state_->threads.emplace_back([s] { s->run(); });
        pthread_setname_np(state_->threads.back().native_handle(), state_->name.substr(0, 15).c_str());
      } catch (...) {
        // No thread to be had: the workers there are take the task; with none, the caller learns.
        if (state_->threads.empty()) {
          task = std::move(state_->queue.back());  // given back
          state_->queue.pop_back();
          throw;
        }
      }
    }
  }
  if (wake) state_->work.notify_one();
}

size_t ThreadPool::max_threads() const { return state_->max_threads; }

size_t ThreadPool::started_threads() const {
  std::lock_guard lock(state_->mutex);
  return state_->threads.size();
}

bool ThreadPool::on_worker() const { return t_worker_of == state_.get(); }

bool ThreadPool::await_idle(std::chrono::milliseconds limit) const {
  std::unique_lock lock(state_->mutex);
  return state_->settled.wait_for(lock, limit, [&] { return state_->queue.empty() && state_->running == 0; });
}

}  // namespace plugboard
