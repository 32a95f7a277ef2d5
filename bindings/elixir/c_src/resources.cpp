#include "resources.h"

#include <atomic>

#include "callback_route.h"
#include "terms.h"

namespace plugboard::nif {
namespace {

template <class T>
ErlNifResourceType*& type_slot() {
  static ErlNifResourceType* type = nullptr;
  return type;
}

std::atomic<int64_t> live[static_cast<int>(ResourceKind::kCount)];

template <class T>
void destroy(ErlNifEnv*, void* memory) {
  auto* slot = static_cast<ResourceSlot<T>*>(memory);
  if (!slot->object) return;
  delete slot->object;  // a destructor never throws (they are noexcept); the library's never block
  slot->object = nullptr;
  count_resource(kind_of<T>(), -1);
}

void call_down(ErlNifEnv*, void* memory, ErlNifPid*, ErlNifMonitor*) {
  if (auto* call = static_cast<ResourceSlot<CallResource>*>(memory)->object) call_handler_down(call);
}

template <class T>
bool open_type(ErlNifEnv* env, const char* name, ErlNifResourceDown* down = nullptr) {
  ErlNifResourceTypeInit init{};
  init.dtor = &destroy<T>;
  init.down = down;
  init.members = 3;
  type_slot<T>() = enif_open_resource_type_x(env, name, &init, ERL_NIF_RT_CREATE, nullptr);
  return type_slot<T>() != nullptr;
}

}  // namespace

void count_resource(ResourceKind kind, int delta) { live[static_cast<int>(kind)].fetch_add(delta, std::memory_order_relaxed); }
int64_t live_resources(ResourceKind kind) { return live[static_cast<int>(kind)].load(std::memory_order_relaxed); }

template <>
ErlNifResourceType* resource_type<ClientResource>() { return type_slot<ClientResource>(); }
template <>
ErlNifResourceType* resource_type<ExecutableResource>() { return type_slot<ExecutableResource>(); }
template <>
ErlNifResourceType* resource_type<BufferResource>() { return type_slot<BufferResource>(); }
template <>
ErlNifResourceType* resource_type<CallResource>() { return type_slot<CallResource>(); }

Expected<std::shared_ptr<const api::Client>> get_client(ErlNifEnv* env, ERL_NIF_TERM term) {
  auto* c = get_resource<ClientResource>(env, enif_is_map(env, term) ? map_get(env, term, "resource").value_or(term) : term);
  if (!c) return invalid_argument("not a plugboard client");
  auto client = c->get();
  if (!client) return make_error(Code::kFailedPrecondition, "the client was closed");
  return client;
}

bool open_resource_types(ErlNifEnv* env) {
  return open_type<ClientResource>(env, "plugboard_client") && open_type<ExecutableResource>(env, "plugboard_executable") &&
         open_type<BufferResource>(env, "plugboard_buffer") && open_type<CallResource>(env, "plugboard_call", &call_down);
}

}  // namespace plugboard::nif
