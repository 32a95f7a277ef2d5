#include "callback/ordered_delivery.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace plugboard {

struct OrderedDelivery::State {
  std::mutex mutex;
  std::condition_variable work;  // tasks queued, or stopping
  std::condition_variable done;  // a task finished
  std::deque<std::function<void()>> queue;
  uint64_t posted = 0, finished = 0;
  bool stopping = false, idle = true;
  std::thread thread;
  std::thread::id thread_id;

  static void run(std::shared_ptr<State> s) {
    std::unique_lock lock(s->mutex);
    for (;;) {
      s->idle = true;
      s->work.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
      if (s->queue.empty()) return;  // stopping, and everything was delivered
      s->idle = false;
      auto task = std::move(s->queue.front());
      s->queue.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // may release the last owner of the OrderedDelivery: `s` keeps the state
      lock.lock();
      ++s->finished;
      s->done.notify_all();
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
    wake = state_->idle;  // a busy thread picks the task up without a wake-up
  }
  if (wake) state_->work.notify_one();
  return ticket;
}

uint64_t OrderedDelivery::last_ticket() const {
  std::lock_guard lock(state_->mutex);
  return state_->posted;
}

void OrderedDelivery::wait_for(uint64_t ticket) {
  std::unique_lock lock(state_->mutex);
  if (state_->thread_id == std::this_thread::get_id()) return;
  state_->done.wait(lock, [&] { return state_->finished >= ticket; });
}

}  // namespace plugboard
