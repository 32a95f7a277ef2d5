#include "resources.h"

#include "callback_route.h"

namespace plugboard::nif {
namespace {

template <class T>
ErlNifResourceType*& type_slot() {
  static ErlNifResourceType* type = nullptr;
  return type;
}

template <class T>
void destroy(ErlNifEnv*, void* memory) {
  auto* slot = static_cast<ResourceSlot<T>*>(memory);
  delete slot->object;  // a destructor never throws (they are noexcept); the library's never block
  slot->object = nullptr;
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

template <>
ErlNifResourceType* resource_type<ClientResource>() { return type_slot<ClientResource>(); }
template <>
ErlNifResourceType* resource_type<ExecutableResource>() { return type_slot<ExecutableResource>(); }
template <>
ErlNifResourceType* resource_type<BufferResource>() { return type_slot<BufferResource>(); }
template <>
ErlNifResourceType* resource_type<CallResource>() { return type_slot<CallResource>(); }

bool open_resource_types(ErlNifEnv* env) {
  return open_type<ClientResource>(env, "plugboard_client") && open_type<ExecutableResource>(env, "plugboard_executable") &&
         open_type<BufferResource>(env, "plugboard_buffer") && open_type<CallResource>(env, "plugboard_call", &call_down);
}

}  // namespace plugboard::nif
