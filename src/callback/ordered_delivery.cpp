#include "callback/ordered_delivery.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/thread_pool.h"
#include "base/trace.h"

namespace plugboard {

namespace {
constexpr int kBatch = 32;  // tasks a queue runs before it lets the next receiver have the thread
thread_local const void* t_running_for = nullptr;  // the State whose task this thread is running
}  // namespace

ThreadPool& delivery_pool() {
  // Never destroyed: a task may still be queued when the process exits, and joining at exit could
  // wait on a host function. The threads end with the process.
  static ThreadPool* pool = new ThreadPool(
      "pb-delivery", std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8));
  return *pool;
}

void deliver_on_pool(std::function<void(Status)> done, Status status) noexcept {
  try {
    delivery_pool().post([done = std::move(done), status = std::move(status)]() mutable {
      trace::Scope span("deliver", "delivery");  // a completion's function, on the delivery thread
      try {
        done(std::move(status));
      } catch (...) {
      }
    });
  } catch (...) {
  }
}

struct OrderedDelivery::State : std::enable_shared_from_this<State> {
  // idle: nothing queued; scheduled: queued, a drain posted to the pool but nobody running;
  // running: one thread (a delivery thread or a waiter) runs the tasks.
  enum class Phase { kIdle, kScheduled, kRunning };

  mutable std::mutex mutex;
  std::condition_variable done;  // a task finished, or the runner stopped
  std::deque<std::function<void()>> queue;
  uint64_t posted = 0, finished = 0;
  Phase phase = Phase::kIdle;

  // Runs the front task with the lock released. Requires the lock, phase kRunning, a task.
  void run_front(std::unique_lock<std::mutex>& lock) {
    auto task = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    const void* outer = t_running_for;
    t_running_for = this;
    task();
    task = nullptr;  // may release the last owner of the OrderedDelivery: the caller keeps the state
    t_running_for = outer;
    lock.lock();
    ++finished;
    done.notify_all();
  }

  // Gives the queue back: idle when empty, else scheduled again on the pool. Requires the lock.
  void stop_running(std::unique_lock<std::mutex>& lock) {
    if (queue.empty()) {
      phase = Phase::kIdle;
      done.notify_all();
      return;
    }
    phase = Phase::kScheduled;
    done.notify_all();
    lock.unlock();
    schedule();
    lock.lock();
  }

  void schedule() {
    delivery_pool().post([self = shared_from_this()] { self->drain(); });
  }

  // On a delivery thread. A drain that finds the queue taken by a waiter (or already emptied by an
  // earlier drain) has nothing to do: whoever runs it schedules again when work is left.
  void drain() {
    std::unique_lock lock(mutex);
    if (phase != Phase::kScheduled) return;
    phase = Phase::kRunning;
    for (int i = 0; i < kBatch && !queue.empty(); ++i) run_front(lock);
    stop_running(lock);
  }
};

OrderedDelivery::OrderedDelivery() : state_(std::make_shared<State>()) {}

OrderedDelivery::~OrderedDelivery() = default;

uint64_t OrderedDelivery::post(std::function<void()>&& task) {
  // All under the queue's lock, the drain's posting too (the pool's lock is only ever taken inside
  // this one, never the other way round): a failure to schedule takes the task back before anyone
  // could have run it, so a caller that handles the failure never sees it run as well.
  std::lock_guard lock(state_->mutex);
  state_->queue.push_back(std::move(task));
  if (state_->phase == State::Phase::kIdle) {
    try {
      state_->schedule();
    } catch (...) {
      task = std::move(state_->queue.back());  // given back: the caller still holds it
      state_->queue.pop_back();
      throw;
    }
    state_->phase = State::Phase::kScheduled;
  }
  return ++state_->posted;
}

bool OrderedDelivery::running_here() const { return t_running_for == state_.get(); }

uint64_t OrderedDelivery::last_ticket() const {
  std::lock_guard lock(state_->mutex);
  return state_->posted;
}

uint64_t OrderedDelivery::finished_ticket() const {
  std::lock_guard lock(state_->mutex);
  return state_->finished;
}

void OrderedDelivery::wait_for(uint64_t ticket) {
  if (t_running_for == state_.get()) return;
  std::shared_ptr<State> s = state_;  // a task may release the last owner of *this
  std::unique_lock lock(s->mutex);
  while (s->finished < ticket) {
    if (s->phase == State::Phase::kScheduled) {
      // Queued, and no delivery thread on it yet: run it here instead of sleeping until one is.
      s->phase = State::Phase::kRunning;
      while (s->finished < ticket && !s->queue.empty()) s->run_front(lock);
      s->stop_running(lock);
    } else {
      s->done.wait(lock);
    }
  }
}

}  // namespace plugboard
