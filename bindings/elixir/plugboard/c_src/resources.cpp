#include "resources.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <type_traits>

#include "callback_route.h"
#include "nif_key_value.h"
#include "terms.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

template <class T>
ErlNifResourceType*& type_slot() {
  static ErlNifResourceType* type = nullptr;
  return type;
}

// The destructors' time on normal schedulers (destructor_ns_on_schedulers), each counted up to
// kChargedAtMost: one that the OS preempted on a loaded machine is not charged the time it was off
// the CPU, while destroys done on the scheduler still show (a PJRT_Buffer_Destroy takes microseconds).
constexpr std::chrono::nanoseconds kChargedAtMost = std::chrono::microseconds(20);

// This library's own: in use unless an older library's was handed on. Leaked: pool threads may use it
// during static destruction.
std::atomic<VmShared*> shared_in_use{new VmShared};
VmShared& vm_shared() { return *shared_in_use.load(std::memory_order_relaxed); }

template <class T>
void destroy(ErlNifEnv* env, void* memory) {
  auto* slot = static_cast<ResourceSlot<T>*>(memory);
  if (!slot->object) return;
  // Run wherever the garbage collection runs, often a normal scheduler: timed there.
  const bool on_scheduler = on_normal_scheduler();
  const auto start = on_scheduler ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if constexpr (std::is_same_v<T, ClientResource>) slot->object->tell_watchers(env);
  delete slot->object;  // a destructor never throws (they are noexcept); the library's never block
  slot->object = nullptr;
  count_resource(kind_of<T>(), -1);
  if (on_scheduler)
    vm_shared().destroy_ns_on_schedulers.fetch_add(std::min<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start, kChargedAtMost).count(),
                                       std::memory_order_relaxed);
}

void call_down(ErlNifEnv*, void* memory, ErlNifPid*, ErlNifMonitor*) {
  if (auto* call = static_cast<ResourceSlot<CallResource>*>(memory)->object) call_handler_down(call);
}

void key_value_down(ErlNifEnv*, void* memory, ErlNifPid*, ErlNifMonitor*) {
  if (auto* kv = static_cast<ResourceSlot<KeyValueResource>*>(memory)->object) kv->handler_down();
}

template <class T>
bool open_type(ErlNifEnv* env, const char* name, ErlNifResourceFlags flags, ErlNifResourceDown* down = nullptr) {
  ErlNifResourceTypeInit init{};
  init.dtor = &destroy<T>;
  init.down = down;
  init.members = 3;
  type_slot<T>() = enif_open_resource_type_x(env, name, &init, flags, nullptr);
  return type_slot<T>() != nullptr;
}

std::string describe(const api::Buffer& b) {
  return shape_string(b.dtype(), std::vector<int64_t>(b.dims().begin(), b.dims().end())) + " on device " + std::to_string(b.device());
}

}  // namespace

void count_resource(ResourceKind kind, int delta) { vm_shared().live[static_cast<int>(kind)].fetch_add(delta, std::memory_order_relaxed); }
int64_t live_resources(ResourceKind kind) { return vm_shared().live[static_cast<int>(kind)].load(std::memory_order_relaxed); }
int64_t destructor_ns_on_schedulers() { return vm_shared().destroy_ns_on_schedulers.load(std::memory_order_relaxed); }

VmShared* vm_shared_in_use() { return shared_in_use.load(); }
void use_vm_shared(VmShared* shared) {
  if (shared) shared_in_use.store(shared);
}

template <>
ErlNifResourceType* resource_type<ClientResource>() { return type_slot<ClientResource>(); }
template <>
ErlNifResourceType* resource_type<ExecutableResource>() { return type_slot<ExecutableResource>(); }
template <>
ErlNifResourceType* resource_type<BufferResource>() { return type_slot<BufferResource>(); }
template <>
ErlNifResourceType* resource_type<CallResource>() { return type_slot<CallResource>(); }
template <>
ErlNifResourceType* resource_type<GateResource>() { return type_slot<GateResource>(); }
template <>
ErlNifResourceType* resource_type<KeyValueResource>() { return type_slot<KeyValueResource>(); }

namespace {
Teardowns& teardowns() { return vm_shared().teardowns; }
void teardown_finished() noexcept {
  Teardowns& t = teardowns();
  {
    std::lock_guard lock(t.mutex);
    --t.in_flight;
  }
  t.done.notify_all();
}
}  // namespace

bool await_teardowns(std::chrono::milliseconds limit) {
  // Ours, then the library's delivery threads' (the last reference to a program, or a completion,
  // let go of there may destroy a client, or hand a resource's teardown to us), until both are done.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
  };
  Teardowns& t = teardowns();
  for (;;) {
    {
      std::unique_lock lock(t.mutex);
      if (!t.done.wait_for(lock, left(), [&] { return t.in_flight == 0; })) return false;
    }
    if (!api::await_deliveries(left())) return false;
    std::lock_guard lock(t.mutex);
    if (t.in_flight == 0) return true;
  }
}

// Runs `drop` on a launch-pool thread, or here when no thread can take it (no memory); counted among
// the teardowns until it has run. Never throws: it runs inside destructors and shared_ptr deleters.
template <class Drop>
void drop_off_scheduler(Drop drop) noexcept {
  try {
    auto task = std::make_shared<Drop>(std::move(drop));
    {
      std::lock_guard lock(teardowns().mutex);
      ++teardowns().in_flight;
    }
    struct Finish {
      ~Finish() { teardown_finished(); }
    };
    if (launch_pool().post([task] {
          Finish finish;
          (*task)();
        }))
      return;
    Finish finish;
    (*task)();
  } catch (...) {
    drop();  // what make_shared could not take is still here
  }
}

std::shared_ptr<const api::Client> guard_client(std::shared_ptr<const api::Client> client) {
  const api::Client* raw = client.get();
  return std::shared_ptr<const api::Client>(raw, [owned = std::move(client)](const api::Client*) mutable noexcept {
    drop_off_scheduler([last = std::move(owned)]() mutable { last.reset(); });
  });
}

namespace {
// Buffers let go of on a scheduler wait here, and one launch-pool task at a time destroys them in
// batches: a garbage collection that drops 100,000 small buffers costs its scheduler a lock and a
// push for each, not 100,000 PJRT_Buffer_Destroy calls. The task in progress is one of the counted
// teardowns, and it takes whatever is queued until the queue is empty. Leaked, as the teardowns are.
struct BufferDrop {
  std::shared_ptr<api::Buffer> buffer;
  std::shared_ptr<const api::Client> client;  // released after the buffer
};
struct DropQueue {
  std::mutex mutex;
  std::vector<BufferDrop> queued;
  bool draining = false;
};
DropQueue& drop_queue() {
  static DropQueue* q = new DropQueue;
  return *q;
}

void drain_drops() noexcept {
  DropQueue& q = drop_queue();
  for (;;) {
    std::vector<BufferDrop> batch;
    {
      std::lock_guard lock(q.mutex);
      if (q.queued.empty()) {
        q.draining = false;
        return;
      }
      batch.swap(q.queued);
    }
    for (BufferDrop& d : batch) {
      d.buffer.reset();
      d.client.reset();
    }
  }
}

void drop_later(BufferDrop drop) noexcept {
  DropQueue& q = drop_queue();
  bool start = false;
  try {
    std::lock_guard lock(q.mutex);
    q.queued.push_back(std::move(drop));  // on no memory, `drop` is left as it was
    start = !std::exchange(q.draining, true);
  } catch (...) {
    drop.buffer.reset();  // dropped here, as before batching
    return;
  }
  if (start) drop_off_scheduler(&drain_drops);
}
}  // namespace

void dispose(std::shared_ptr<api::Buffer> buffer) noexcept {
  // Off a normal scheduler, or small: dropped here. (Whether this is the last reference is not asked:
  // another holder may let go at the same moment.)
  if (!buffer || !on_normal_scheduler() || buffer->byte_size() <= kDirtyCopyBytes) return;
  drop_later({std::move(buffer), nullptr});
}

ClientResource::ClientResource(std::shared_ptr<const api::Client> c)
    : id(vm_shared().client_ids.fetch_add(1, std::memory_order_relaxed) + 1), client_(guard_client(std::move(c))) {}

Status ClientResource::watch(const ErlNifPid& pid, ERL_NIF_TERM message) {
  auto watcher = std::make_unique<Watcher>();
  if (!watcher->env) return make_error(Code::kResourceExhausted, "no environment to keep the message in");
  watcher->pid = pid;
  watcher->message = enif_make_copy(watcher->env.get(), message);
  std::lock_guard lock(mutex_);
  watchers_.push_back(std::move(watcher));
  return ok();
}

void ClientResource::tell_watchers(ErlNifEnv* caller_env) noexcept {
  std::vector<std::unique_ptr<Watcher>> watchers;
  {
    std::lock_guard lock(mutex_);
    watchers.swap(watchers_);
  }
  for (const auto& w : watchers) (void)enif_send(caller_env, &w->pid, w->env.get(), w->message);
}

ExecutableResource::~ExecutableResource() {
  // PJRT_LoadedExecutable_Destroy unloads the program (a GPU module): not on a scheduler; and from
  // any thread (a delivery thread letting go of an execution's completion), a counted teardown.
  drop_off_scheduler([last = std::move(executable), client = std::move(client)]() mutable {
    last = api::Executable(nullptr);
    client.reset();
  });
}

// Run by the garbage collector, wherever it runs: every buffer, however small, goes to the batches
// (counted among the teardowns from any thread, a delivery thread's included).
BufferResource::~BufferResource() {
  if (buffer) drop_later({std::move(buffer), std::move(client)});
}

Expected<std::shared_ptr<api::Buffer>> BufferResource::use(std::string_view as) {
  std::lock_guard lock(mutex);
  if (buffer && buffer->valid()) return buffer;
  const std::string head = std::string(as) + " (" + (what.empty() ? "a buffer" : "buffer " + what) + ")";
  switch (gone) {
    case Gone::kFreed: return make_error(Code::kFailedPrecondition, head + " was freed by Plugboard.free/1");
    case Gone::kDonated:
    case Gone::kNo: break;
  }
  return make_error(Code::kFailedPrecondition, head + " was donated to an earlier execution");
}

std::shared_ptr<api::Buffer> BufferResource::take(Gone why) {
  if (buffer && buffer->valid()) what = describe(*buffer);
  gone = why;
  return std::move(buffer);
}

Status BufferResource::free() {
  std::shared_ptr<api::Buffer> last;
  {
    std::lock_guard lock(mutex);
    if (!buffer || !buffer->valid()) {
      if (gone == Gone::kFreed) return ok();  // freeing twice is harmless
      return make_error(Code::kFailedPrecondition, "buffer " + what + " was donated to an earlier execution");
    }
    last = take(Gone::kFreed);
  }
  // The memory goes now unless a running execution holds the buffer, and then when it is done.
  dispose(std::move(last));
  return ok();
}

ClientResource* get_client_resource(ErlNifEnv* env, ERL_NIF_TERM term) {
  return get_resource<ClientResource>(env, enif_is_map(env, term) ? map_get(env, term, "resource").value_or(term) : term);
}

Expected<std::shared_ptr<const api::Client>> get_client(ErlNifEnv* env, ERL_NIF_TERM term) {
  auto* c = get_client_resource(env, term);
  if (!c) return invalid_argument("not a plugboard client");
  auto client = c->get();
  if (!client) return make_error(Code::kFailedPrecondition, "the client was closed");
  return client;
}

bool open_resource_types(ErlNifEnv* env, ErlNifResourceFlags flags) {
  return open_type<ClientResource>(env, "plugboard_client", flags) &&
         open_type<ExecutableResource>(env, "plugboard_executable", flags) &&
         open_type<BufferResource>(env, "plugboard_buffer", flags) &&
         open_type<CallResource>(env, "plugboard_call", flags, &call_down) &&
         open_type<GateResource>(env, "plugboard_gate", flags) &&
         open_type<KeyValueResource>(env, "plugboard_key_value", flags, &key_value_down);
}

}  // namespace plugboard::nif
