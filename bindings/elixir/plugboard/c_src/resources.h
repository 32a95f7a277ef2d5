// The native objects Elixir holds, as NIF resources owned by the garbage collector: a term refers
// to one, and the object is destroyed (its destructor run) once no term, message or native thread
// refers to it any more.
#pragma once

#include <erl_nif.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <atomic>
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "inline_launch_judge.h"
#include "plugboard/plugboard.h"
#include "terms.h"

namespace plugboard::nif {

// Every client the NIF hands out is wrapped so that the last reference to it, wherever it is dropped
// (close/1, the GC destroying a client, executable or buffer term, on a scheduler), hands the client
// to a launch-pool thread to destroy: PJRT_Client_Destroy can take long (a GPU's teardown). Every
// object that may keep the client alive (executables, buffers) holds one of these too, so the
// plugin's own references always go before it.
std::shared_ptr<const api::Client> guard_client(std::shared_ptr<const api::Client> client);

// Drops a reference to a buffer; the last one of a large buffer dropped on a scheduler goes to a
// launch-pool thread (releasing many pages can take milliseconds), batched with the buffers the
// garbage collector lets go of past a burst's first few (~BufferResource: a collection may drop
// thousands at once).
void dispose(std::shared_ptr<api::Buffer> buffer) noexcept;
// Waits up to `limit` for the teardowns handed to the launch pool (clients, executables, buffers)
// and for the library's delivery threads (api::await_deliveries: the releases done there) to finish;
// false if some are still running then.
bool await_teardowns(std::chrono::milliseconds limit);

// A client; close/1 lets go of it early (executables and buffers keep their own reference, not this
// resource). `id` is never given to another client of this VM (client_id/1): a cache can key on it
// without holding the term. Watchers (notify_when_dropped/3) are told when the garbage collector
// destroys the resource, i.e. once no term refers to it any more; executables and buffers made from
// the client do not keep it.
struct ClientResource {
  explicit ClientResource(std::shared_ptr<const api::Client> c);
  const uint64_t id;
  std::shared_ptr<const api::Client> get() {
    std::lock_guard lock(mutex_);
    return client_;
  }
  void close() {
    std::shared_ptr<const api::Client> last;
    std::lock_guard lock(mutex_);
    last.swap(client_);
  }
  // `pid` gets a copy of `message` when the resource is destroyed. Several may watch one client.
  Status watch(const ErlNifPid& pid, ERL_NIF_TERM message);
  // Sends each watcher its message: from the resource's destructor callback (`caller_env` is that
  // callback's environment). Never blocks; a watcher that is gone is skipped.
  void tell_watchers(ErlNifEnv* caller_env) noexcept;

 private:
  struct Watcher {
    ErlNifPid pid;
    OwnedEnv env;  // holds `message`, independent of any process
    ERL_NIF_TERM message;
  };
  std::mutex mutex_;
  std::shared_ptr<const api::Client> client_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
};

// An executable, and where its executions start (nif_execute.cpp): on the calling scheduler only
// when nothing about the program says it could run long and its launches stay quick
// (inline_launch_judge.h).
struct ExecutableResource {
  ExecutableResource(std::shared_ptr<const api::Client> c, api::Executable e, bool inline_ok)
      : client(std::move(c)), executable(std::move(e)), launch_judge(std::make_shared<InlineLaunchJudge>(inline_ok)) {}
  ~ExecutableResource();  // the executable and the client go on a launch-pool thread
  std::shared_ptr<const api::Client> client;  // declared first: destroyed after the executable
  api::Executable executable;
  std::shared_ptr<InlineLaunchJudge> launch_judge;  // shared with launches on the pool, which judge it too
};

// What a buffer's memory is, as far as donation goes: its own, or memory it only views (never donated).
enum class BufferOrigin {
  kOwned,
  kBinaryView,   // an adopted Erlang binary (buffer/5 adopts binaries over 64 bytes), however the plugin made it
  kPointerView,  // device memory at an address (buffer_from_pointer/5), owned by someone else
};

// A device buffer. Reads take a reference to the Buffer under the lock and use it outside; donation
// and free/1 take the Buffer away (donation only when nothing else is using it at that moment),
// after which every use is FAILED_PRECONDITION naming the buffer and why it is gone.
struct BufferResource {
  enum class Gone { kNo, kDonated, kFreed };
  BufferResource(std::shared_ptr<api::Buffer> b, std::shared_ptr<const api::Client> c, BufferOrigin o)
      : client(std::move(c)), buffer(std::move(b)), origin(o) {}
  ~BufferResource();  // the buffer goes here (a burst's first few, or a dirty scheduler) or to the drain
  std::shared_ptr<const api::Client> client;  // declared first: destroyed after the buffer
  std::mutex mutex;
  std::shared_ptr<api::Buffer> buffer;  // null once gone
  Gone gone = Gone::kNo;
  std::string what;  // "f32[4] on device 0", set when it goes (the Buffer's shape is gone with it)
  // A view (of an Erlang binary, whatever its alignment, or of an address) is never handed over.
  const BufferOrigin origin;
  bool donatable() const { return origin == BufferOrigin::kOwned; }
  std::shared_ptr<api::Buffer> get() {
    std::lock_guard lock(mutex);
    return buffer;
  }
  // The buffer, or FAILED_PRECONDITION saying why it is gone.
  Expected<std::shared_ptr<api::Buffer>> use(std::string_view as);
  // Takes the buffer away (the caller holds the lock); `buffer` must be set.
  std::shared_ptr<api::Buffer> take(Gone why);
  // free/1: the device memory goes as soon as no running execution uses it.
  Status free();
};

class PendingCall;
// A blocking host call waiting for its answer from an Elixir process (see callback_route.h).
// Destroyed unanswered (the message dropped, its process gone): the call fails.
struct CallResource {
  std::shared_ptr<PendingCall> call;
  ErlNifMonitor monitor{};
  std::atomic<bool> monitored{false};
  explicit CallResource(std::shared_ptr<PendingCall> c) : call(std::move(c)) {}
  ~CallResource();
};

class ReplyGate;
// The caller's handle on an asynchronous call (reply_gate.h): cancel/1 closes it.
struct GateResource {
  explicit GateResource(std::shared_ptr<ReplyGate> g) : gate(std::move(g)) {}
  std::shared_ptr<ReplyGate> gate;
};

struct KeyValueResource;  // nif_key_value.h: a KeyValueStore answered by an Elixir process

// Registered at load (flags ERL_NIF_RT_CREATE) and on a code upgrade (also ERL_NIF_RT_TAKEOVER: the
// new library's callbacks take over the resources the old one made).
bool open_resource_types(ErlNifEnv* env, ErlNifResourceFlags flags);

template <class T>
ErlNifResourceType* resource_type();
template <>
ErlNifResourceType* resource_type<ClientResource>();
template <>
ErlNifResourceType* resource_type<ExecutableResource>();
template <>
ErlNifResourceType* resource_type<BufferResource>();
template <>
ErlNifResourceType* resource_type<CallResource>();
template <>
ErlNifResourceType* resource_type<GateResource>();
template <>
ErlNifResourceType* resource_type<KeyValueResource>();

// What a resource's memory holds: the object, made before the resource (so that a constructor that
// throws leaves nothing behind) and deleted by the resource's destructor callback.
template <class T>
struct ResourceSlot {
  T* object = nullptr;
};

// The client resource behind a client term (or %Plugboard.Client{}), or nullptr.
ClientResource* get_client_resource(ErlNifEnv* env, ERL_NIF_TERM term);
// The client behind a client term (or %Plugboard.Client{}); FAILED_PRECONDITION once closed.
Expected<std::shared_ptr<const api::Client>> get_client(ErlNifEnv* env, ERL_NIF_TERM term);

// Live objects of each resource type (what the tests watch the garbage collector release).
enum class ResourceKind { kClient, kExecutable, kBuffer, kCall, kGate, kKeyValue, kCount };
template <class T>
constexpr ResourceKind kind_of();
void count_resource(ResourceKind kind, int delta);
int64_t live_resources(ResourceKind kind);
// Device buffers destroyed (PJRT_Buffer_Destroy: the last reference let go of) on a normal scheduler
// thread, for the life of the VM: a collection's first few (see ~BufferResource) and free/1's small
// ones. What the tests check a collection that drops thousands costs its scheduler.
int64_t buffer_destroys_on_schedulers();
// Messages notify_when_dropped/3 copied on a normal scheduler thread (0 while it is a dirty NIF).
int64_t message_copies_on_schedulers();

struct Teardowns {
  std::mutex mutex;
  std::condition_variable done;
  int64_t in_flight = 0;
};

// What every library of this VM uses together, for the life of the VM: the first library's, handed
// to the one that takes over from it on a hot upgrade (nif.cpp; a second build of the NIF is a
// library with statics of its own). So no client id is given twice, an object the old library made
// is counted where it was counted when the new one destroys it, and await_teardowns waits for the
// teardowns the old library's threads still run. Part of the library's identity: raise
// kResourceLayout (nif.cpp) whenever it changes.
struct VmShared {
  std::atomic<uint64_t> client_ids{0};  // the last id given (client_id/1)
  std::atomic<int64_t> live[static_cast<int>(ResourceKind::kCount)]{};
  std::atomic<int64_t> buffer_destroys_on_schedulers{0};
  std::atomic<int64_t> message_copies_on_schedulers{0};
  // The teardowns handed to the launch pool and not finished yet, so that the VM's stop can let them
  // finish before exit(): a plugin's objects destroyed while exit() tears down the plugin's own
  // statics crash it (the 0.106 plugin aborted in ~ExecutionEngine).
  Teardowns teardowns;
};
VmShared* vm_shared_in_use();
void use_vm_shared(VmShared* shared);  // null: keeps the one in use

struct NewResource {
  ERL_NIF_TERM term;
  void* handle;  // for enif_monitor_process and friends
};

// A resource term that owns `object` from now on.
template <class T>
NewResource make_resource_term(ErlNifEnv* env, std::unique_ptr<T> object) {
  void* memory = enif_alloc_resource(resource_type<T>(), sizeof(ResourceSlot<T>));
  if (!memory) throw std::bad_alloc();
  static_cast<ResourceSlot<T>*>(memory)->object = object.release();
  count_resource(kind_of<T>(), +1);
  ERL_NIF_TERM term = enif_make_resource(env, memory);
  enif_release_resource(memory);
  return {term, memory};
}

template <class T, class... Args>
ERL_NIF_TERM make_resource(ErlNifEnv* env, Args&&... args) {
  return make_resource_term(env, std::make_unique<T>(std::forward<Args>(args)...)).term;
}

template <>
constexpr ResourceKind kind_of<ClientResource>() { return ResourceKind::kClient; }
template <>
constexpr ResourceKind kind_of<ExecutableResource>() { return ResourceKind::kExecutable; }
template <>
constexpr ResourceKind kind_of<BufferResource>() { return ResourceKind::kBuffer; }
template <>
constexpr ResourceKind kind_of<CallResource>() { return ResourceKind::kCall; }
template <>
constexpr ResourceKind kind_of<GateResource>() { return ResourceKind::kGate; }
template <>
constexpr ResourceKind kind_of<KeyValueResource>() { return ResourceKind::kKeyValue; }

// The object behind a resource term of type T, or nullptr.
template <class T>
T* get_resource(ErlNifEnv* env, ERL_NIF_TERM term) {
  void* memory = nullptr;
  if (!enif_get_resource(env, term, resource_type<T>(), &memory)) return nullptr;
  return static_cast<ResourceSlot<T>*>(memory)->object;
}

// A reference to a resource from native code (enif_keep_resource): its object lives at least as long
// as this, whatever the garbage collector does with the terms. Released from any thread.
template <class T>
class KeptResource {
 public:
  KeptResource() = default;
  // `memory` as enif_get_resource gives it.
  explicit KeptResource(void* memory) : memory_(memory) {
    if (memory_) enif_keep_resource(memory_);
  }
  KeptResource(KeptResource&& other) noexcept : memory_(std::exchange(other.memory_, nullptr)) {}
  KeptResource& operator=(KeptResource&& other) noexcept {
    if (this != &other) {
      reset();
      memory_ = std::exchange(other.memory_, nullptr);
    }
    return *this;
  }
  KeptResource(const KeptResource&) = delete;
  KeptResource& operator=(const KeptResource&) = delete;
  ~KeptResource() { reset(); }
  T* get() const { return memory_ ? static_cast<ResourceSlot<T>*>(memory_)->object : nullptr; }
  T* operator->() const { return get(); }
  explicit operator bool() const { return memory_ != nullptr; }

 private:
  void reset() {
    if (memory_) enif_release_resource(std::exchange(memory_, nullptr));
  }
  void* memory_ = nullptr;
};

// The resource behind a term (or a struct's `resource` field), kept.
template <class T>
KeptResource<T> keep_resource(ErlNifEnv* env, ERL_NIF_TERM term) {
  void* memory = nullptr;
  if (!enif_get_resource(env, term, resource_type<T>(), &memory)) return {};
  return KeptResource<T>(memory);
}

}  // namespace plugboard::nif
