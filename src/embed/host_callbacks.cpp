// The facade's HostCallbacks: a shared handle on one runtime receiver.
#include "base/no_throw.h"
#include "embed/handles.h"

namespace plugboard::api {

Expected<HostCallbacks> HostCallbacks::create() noexcept {
  return no_throw("making a host-callback receiver", [&]() -> Expected<HostCallbacks> {
    return HostCallbacks(std::make_shared<Impl>(Impl{std::make_shared<plugboard::HostCallbacks>()}));
  });
}

Status HostCallbacks::add_blocking(std::string name, BlockingFunction fn) noexcept {
  return no_throw("binding a host callback", [&] { return impl_->receiver->add_blocking(std::move(name), std::move(fn)); });
}

Status HostCallbacks::add_ordered(std::string name, OrderedFunction fn) noexcept {
  return no_throw("binding a host callback", [&] { return impl_->receiver->add_ordered(std::move(name), std::move(fn)); });
}

std::vector<std::string> HostCallbacks::names() const noexcept {
  try {
    return impl_->receiver->names();
  } catch (...) {
    return {};
  }
}

}  // namespace plugboard::api
