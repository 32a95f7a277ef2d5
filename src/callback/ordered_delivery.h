// Where one receiver's ordered (non-blocking) host callbacks are delivered: its tasks run one at a
// time, in the order they were posted, never on the plugin thread that posted them.
//
// Every receiver's queue runs on one process-wide pool of delivery threads (delivery_pool(): a few
// threads, however many receivers there are), so a thousand receivers cost a thousand small queues,
// not a thousand threads. A plugin thread only queues (a lock, a push, and a wake-up when the queue
// was empty and a worker sleeps); nothing polls. A queue runs a bounded batch of tasks before it
// yields its thread to the next receiver, so one chatty receiver does not starve the others.
//
// A thread that waits for tasks (wait_for: CallbackExecution::await, or a blocking call that must
// see the earlier ordered ones first) runs what is still queued itself when no delivery thread has
// started on it, rather than sleep until one does. Either way one task runs at a time, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "base/status.h"

namespace plugboard {

class ThreadPool;

// The shared pool every receiver delivers on (and execution completions are reported from).
ThreadPool& delivery_pool();
// Calls `done(status)` on a delivery-pool thread: how every caller's completion function is run
// (on_complete, to_host_async). An exception from `done` is swallowed (nobody to throw to there);
// when not even that can be queued, `done` is dropped uncalled.
void deliver_on_pool(std::function<void(Status)> done, Status status) noexcept;

class OrderedDelivery {
 public:
  OrderedDelivery();
  // Never waits: tasks still queued keep the queue alive and run as usual (each holds what it uses).
  ~OrderedDelivery();
  OrderedDelivery(const OrderedDelivery&) = delete;
  OrderedDelivery& operator=(const OrderedDelivery&) = delete;

  // Queues `task`; returns its ticket (1, 2, ...). Never waits for the task itself. Tasks must not
  // throw. When queuing fails (an exception: no memory, no thread to be had), `task` is left as it
  // was, so the caller still holds it.
  uint64_t post(std::function<void()>&& task);
  // True on a thread that is running one of this queue's tasks.
  bool running_here() const;
  // Runs or waits for every task with a ticket up to `ticket`. Returns at once when called from one
  // of this queue's tasks (a task waiting for its own queue would never finish).
  void wait_for(uint64_t ticket);
  // The ticket of the last task posted so far, and of the last one finished.
  uint64_t last_ticket() const;
  uint64_t finished_ticket() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace plugboard
