// The native objects Elixir holds, as NIF resources owned by the garbage collector: a term refers
// to one, and the object is destroyed (its destructor run) once no term, message or native thread
// refers to it any more.
#pragma once

#include <erl_nif.h>

#include <memory>
#include <mutex>
#include <atomic>
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "plugboard/plugboard.h"

namespace plugboard::nif {

// A client; close/1 lets go of it early (executables and buffers keep their own reference).
struct ClientResource {
  explicit ClientResource(std::shared_ptr<const api::Client> c) : client_(std::move(c)) {}
  std::shared_ptr<const api::Client> get() {
    std::lock_guard lock(mutex_);
    return client_;
  }
  void close() {
    std::shared_ptr<const api::Client> last;
    std::lock_guard lock(mutex_);
    last.swap(client_);
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<const api::Client> client_;
};

struct ExecutableResource {
  std::shared_ptr<const api::Client> client;
  api::Executable executable;
};

// A device buffer. Reads take a reference to the Buffer under the lock and use it outside; donation
// takes the Buffer away (only when nothing else is using it at that moment), after which every use
// is FAILED_PRECONDITION.
struct BufferResource {
  explicit BufferResource(std::shared_ptr<api::Buffer> b) : buffer(std::move(b)) {}
  std::mutex mutex;
  std::shared_ptr<api::Buffer> buffer;  // null once donated
  std::shared_ptr<api::Buffer> get() {
    std::lock_guard lock(mutex);
    return buffer;
  }
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

// Registered at load: the types of every resource above.
bool open_resource_types(ErlNifEnv* env);

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

// What a resource's memory holds: the object, made before the resource (so that a constructor that
// throws leaves nothing behind) and deleted by the resource's destructor callback.
template <class T>
struct ResourceSlot {
  T* object = nullptr;
};

// The client behind a client term (or %Plugboard.Client{}); FAILED_PRECONDITION once closed.
Expected<std::shared_ptr<const api::Client>> get_client(ErlNifEnv* env, ERL_NIF_TERM term);

// Live objects of each resource type (what the tests watch the garbage collector release).
enum class ResourceKind { kClient, kExecutable, kBuffer, kCall, kCount };
template <class T>
constexpr ResourceKind kind_of();
void count_resource(ResourceKind kind, int delta);
int64_t live_resources(ResourceKind kind);

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

// The object behind a resource term of type T, or nullptr.
template <class T>
T* get_resource(ErlNifEnv* env, ERL_NIF_TERM term) {
  void* memory = nullptr;
  if (!enif_get_resource(env, term, resource_type<T>(), &memory)) return nullptr;
  return static_cast<ResourceSlot<T>*>(memory)->object;
}

}  // namespace plugboard::nif
