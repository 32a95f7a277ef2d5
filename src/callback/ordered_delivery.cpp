#include "callback/ordered_delivery.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace plugboard {

namespace {
constexpr auto kPollInterval = std::chrono::milliseconds(1);
constexpr auto kLinger = std::chrono::milliseconds(50);  // polling goes on this long after the last execution
constexpr size_t kWakeAt = 64;  // queued tasks that wake the delivery thread at once
thread_local const void* t_running_for = nullptr;  // the State whose task this thread is running
}  // namespace

struct OrderedDelivery::State {
  std::mutex mutex;
  std::condition_variable work;  // many tasks queued, executions started, or stopping
  std::condition_variable done;  // a task finished
  std::deque<std::function<void()>> queue;
  uint64_t posted = 0, finished = 0;
  int active = 0;        // executions in flight
  bool running = false;  // a task is running (on whichever thread): the next one waits for it
  bool stopping = false;
  bool sleeping = false;  // in the untimed wait: only a notify wakes it
  std::chrono::steady_clock::time_point last_active{};
  std::thread thread;
  std::thread::id thread_id;

  // Pops the front task and runs it with the lock released. Requires the lock, !running, a task.
  void run_front(std::unique_lock<std::mutex>& lock) {
    auto task = std::move(queue.front());
    queue.pop_front();
    running = true;
    lock.unlock();
    const void* outer = t_running_for;
    t_running_for = this;
    task();
    task = nullptr;  // may release the last owner of the OrderedDelivery: the caller keeps the state
    t_running_for = outer;
    lock.lock();
    running = false;
    ++finished;
    done.notify_all();
  }

  static void run(std::shared_ptr<State> s) {
    std::unique_lock lock(s->mutex);
    for (;;) {
      if (!s->running && !s->queue.empty()) {
        s->run_front(lock);
        continue;
      }
      if (s->stopping && s->queue.empty() && !s->running) return;
      const auto now = std::chrono::steady_clock::now();
      if (s->active > 0) s->last_active = now;
      if (s->running) {
        s->done.wait_for(lock, kPollInterval);  // another thread is running a task; ours may be next
      } else if (s->active > 0 || now - s->last_active < kLinger) {
        s->work.wait_for(lock, kPollInterval);
      } else {
        s->sleeping = true;
        s->work.wait(lock);
        s->sleeping = false;
      }
    }
  }
};

OrderedDelivery::OrderedDelivery() : state_(std::make_shared<State>()) {}

OrderedDelivery::~OrderedDelivery() {
  std::thread thread;
  bool own_thread;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    thread = std::move(state_->thread);
    own_thread = state_->thread_id == std::this_thread::get_id();
  }
  state_->work.notify_all();
  state_->done.notify_all();
  if (!thread.joinable()) return;
  if (own_thread)
    thread.detach();
  else
    thread.join();
}

uint64_t OrderedDelivery::post(std::function<void()> task) {
  bool wake;
  uint64_t ticket;
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->thread.joinable() && !state_->stopping) {
      state_->thread = std::thread(&State::run, state_);
      state_->thread_id = state_->thread.get_id();
    }
    state_->queue.push_back(std::move(task));
    ticket = ++state_->posted;
    // A polling thread needs no wake-up (a system call on the plugin's thread); a sleeping one does,
    // and so does a long queue.
    wake = state_->sleeping || state_->queue.size() == kWakeAt;
  }
  if (wake) state_->work.notify_one();
  return ticket;
}

uint64_t OrderedDelivery::last_ticket() const {
  std::lock_guard lock(state_->mutex);
  return state_->posted;
}

void OrderedDelivery::wait_for(uint64_t ticket) {
  if (t_running_for == state_.get()) return;
  std::shared_ptr<State> s = state_;  // a task may release the last owner of *this
  std::unique_lock lock(s->mutex);
  while (s->finished < ticket) {
    if (!s->running && !s->queue.empty())
      s->run_front(lock);
    else
      s->done.wait(lock);
  }
}

void OrderedDelivery::begin_execution() {
  bool wake;
  {
    std::lock_guard lock(state_->mutex);
    ++state_->active;
    wake = state_->sleeping;
  }
  if (wake) state_->work.notify_one();  // from a host thread: the delivery thread starts polling
}

void OrderedDelivery::end_execution() {
  std::lock_guard lock(state_->mutex);
  if (state_->active > 0) --state_->active;
}

}  // namespace plugboard
