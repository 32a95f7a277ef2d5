// Where ordered (non-blocking) host callbacks are delivered: tasks run one at a time, in the order
// they were posted, never on the plugin thread that posted them.
//
// A plugin thread only queues (a lock and a push, no system call), so the program does not wait
// for the host, nor for the host thread to be woken. The tasks are then run by
//  - the delivery thread, which looks at the queue every millisecond while an execution is in flight
//    and for 50 ms after (so a long program's prints appear as it runs; then it sleeps until the
//    next execution), and at once when the queue grows long; or
//  - the thread that waits for them (wait_for, from CallbackExecution::await), which runs what is
//    still queued itself rather than wake another thread and sleep.
// Either way one task runs at a time, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace plugboard {

class OrderedDelivery {
 public:
  OrderedDelivery();
  // Runs what is queued, then joins the thread. When the last owner lets go from inside a task, the
  // thread is detached instead and ends once the queue is empty (its state outlives this object).
  ~OrderedDelivery();
  OrderedDelivery(const OrderedDelivery&) = delete;
  OrderedDelivery& operator=(const OrderedDelivery&) = delete;

  // Queues `task`; returns its ticket (1, 2, ...). Never waits for the task itself. Tasks must not
  // throw.
  uint64_t post(std::function<void()> task);
  // Runs or waits for every task with a ticket up to `ticket`. Returns at once when called from a
  // task (a task waiting for its own queue would never finish).
  void wait_for(uint64_t ticket);
  // The ticket of the last task posted so far.
  uint64_t last_ticket() const;
  // Executions in flight: while there are any, the delivery thread polls the queue.
  void begin_execution();
  void end_execution();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace plugboard
