// One host thread that runs tasks in the order they were posted: where ordered (non-blocking) host
// callbacks are delivered, so that a plugin thread only copies and posts. Started on the first post.
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
  // Blocks until every task with a ticket up to `ticket` has run. Returns at once when called on the
  // delivery thread itself (a task waiting for its own queue would never finish).
  void wait_for(uint64_t ticket);
  // The ticket of the last task posted so far.
  uint64_t last_ticket() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace plugboard
