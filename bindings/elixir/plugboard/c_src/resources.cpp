#include "resources.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
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

// This library's own: in use unless an older library's was handed on. Leaked: pool threads may use it
// during static destruction.
std::atomic<VmShared*> shared_in_use{new VmShared};
VmShared& vm_shared() { return *shared_in_use.load(std::memory_order_relaxed); }

template <class T>
void destroy(ErlNifEnv* env, void* memory) {
  auto* slot = static_cast<ResourceSlot<T>*>(memory);
  if (!slot->object) return;
  if constexpr (std::is_same_v<T, ClientResource>) slot->object->tell_watchers(env);
  delete slot->object;  // a destructor never throws (they are noexcept); the library's never block
  slot->object = nullptr;
  count_resource(kind_of<T>(), -1);
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
int64_t buffer_destroys_on_schedulers() { return vm_shared().buffer_destroys_on_schedulers.load(std::memory_order_relaxed); }
int64_t message_copies_on_schedulers() { return vm_shared().message_copies_on_schedulers.load(std::memory_order_relaxed); }

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

// Lets go of `buffer` on this thread; a destroy (the last reference) on a normal scheduler is counted
// (buffer_destroys_on_schedulers). Another holder letting go at the same moment may make it uncounted.
void release_here(std::shared_ptr<api::Buffer>& buffer) noexcept {
  const bool counted = on_normal_scheduler() && buffer.use_count() == 1;
  buffer.reset();
  if (counted) vm_shared().buffer_destroys_on_schedulers.fetch_add(1, std::memory_order_relaxed);
}

// A burst of buffer drops on one normal scheduler thread (a garbage collection letting go of many:
// the VM runs their destructors as aux work of that scheduler right after the collection, OTP's
// nif_resource_dtor_prologue): its first kBurstInline small buffers, within kBurstTime, are destroyed
// there, so that the few a step drops give their memory back then, not after whatever the drain has
// queued (Plugboard.Nx's BufferPressure collects a process so that the next outputs reuse it); the
// rest of the burst goes to the drain. The burst ends
// when, after a pause of kPause, the thread is found to have done kOtherWork of CPU work since its last
// drop (it ran something else), or after kIdle; a pause that is only the OS preempting the thread
// (a loaded machine) does not end it, so a collection that drops 50,000 destroys kBurstInline here.
// A loop of small runs (Plugboard.run! of x + 1) drops a few hundred outputs a collection: with a
// burst of 64 (50 us) the rest went to the drain, whose destroys on another thread, beside the loop's
// next executions, made each run 1.4-2.3x as long (issue 36); 512 within 250 us takes a loop's whole
// collection here and still holds a scheduler a quarter of a millisecond at most.
constexpr int kBurstInline = 512;
constexpr std::chrono::nanoseconds kBurstTime = std::chrono::microseconds(250);
constexpr std::chrono::nanoseconds kPause = std::chrono::microseconds(50);
constexpr std::chrono::nanoseconds kOtherWork = std::chrono::microseconds(50);
constexpr std::chrono::nanoseconds kIdle = std::chrono::milliseconds(100);

struct Burst {
  int inline_drops = 0;
  std::chrono::nanoseconds inline_time{0};
  std::chrono::steady_clock::time_point last_drop{};  // when this thread's last drop ended
  std::chrono::steady_clock::time_point cpu_read_at{};
  std::chrono::nanoseconds cpu_at_read{-1};  // the thread's CPU time then (-1: never read)
};
thread_local Burst burst;

std::chrono::nanoseconds thread_cpu_time() noexcept {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return std::chrono::nanoseconds(-1);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// Whether a drop starting `now` on this normal scheduler thread may destroy its buffer here.
bool within_burst_budget(std::chrono::steady_clock::time_point now) noexcept {
  Burst& b = burst;
  if (now - b.last_drop >= kPause) {
    // The CPU time read only after a pause (a system call): what the thread used since its last drop
    // is at least what it used since the last reading, less the wall time from then to that drop.
    const std::chrono::nanoseconds cpu = thread_cpu_time();
    const bool other_work = cpu.count() >= 0 && b.cpu_at_read.count() >= 0 &&
                            cpu - b.cpu_at_read - (b.last_drop - b.cpu_read_at) >= kOtherWork;
    if (other_work || now - b.last_drop >= kIdle || b.cpu_at_read.count() < 0) {
      b.inline_drops = 0;
      b.inline_time = std::chrono::nanoseconds(0);
    }
    b.cpu_at_read = cpu;
    b.cpu_read_at = now;
  }
  return b.inline_drops < kBurstInline && b.inline_time < kBurstTime;
}
}  // namespace

void dispose(std::shared_ptr<api::Buffer> buffer) noexcept {
  // Large on a normal scheduler: to the drain (releasing many pages can take milliseconds). Otherwise
  // dropped here. (Whether this is the last reference is not asked: another holder may let go at the
  // same moment.)
  if (!buffer) return;
  if (on_normal_scheduler() && buffer->byte_size() > kDirtyCopyBytes) return drop_later({std::move(buffer), nullptr});
  release_here(buffer);
}

ClientResource::ClientResource(std::shared_ptr<const api::Client> c)
    : id(vm_shared().client_ids.fetch_add(1, std::memory_order_relaxed) + 1), client_(guard_client(std::move(c))) {}

Status ClientResource::watch(const ErlNifPid& pid, ERL_NIF_TERM message) {
  auto watcher = std::make_unique<Watcher>();
  if (!watcher->env) return make_error(Code::kResourceExhausted, "no environment to keep the message in");
  watcher->pid = pid;
  watcher->message = enif_make_copy(watcher->env.get(), message);
  if (on_normal_scheduler()) vm_shared().message_copies_on_schedulers.fetch_add(1, std::memory_order_relaxed);
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

// Run where the VM runs the destructor (aux work of the collecting scheduler). On a normal scheduler:
// a small buffer within the burst's budget is destroyed here, any other goes to the drain. On a dirty
// scheduler: here. On any other thread (a delivery thread letting go
// of the last reference): to the drain, counted among the teardowns.
BufferResource::~BufferResource() {
  if (!buffer) return;
  switch (enif_thread_type()) {
    case ERL_NIF_THR_NORMAL_SCHEDULER: {
      const auto start = std::chrono::steady_clock::now();
      if (buffer->byte_size() <= kDirtyCopyBytes && within_burst_budget(start)) {
        release_here(buffer);
        burst.last_drop = std::chrono::steady_clock::now();
        ++burst.inline_drops;
        burst.inline_time += burst.last_drop - start;
      } else {
        drop_later({std::move(buffer), std::move(client)});
        burst.last_drop = std::chrono::steady_clock::now();
      }
      return;
    }
    case ERL_NIF_THR_DIRTY_CPU_SCHEDULER:
    case ERL_NIF_THR_DIRTY_IO_SCHEDULER: release_here(buffer); return;
    default: drop_later({std::move(buffer), std::move(client)}); return;
  }
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
