#include "callback/host_callbacks.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "callback/ordered_delivery.h"

namespace plugboard {

namespace {

std::string shape_of(DType dtype, std::span<const int64_t> dims) {
  return shape_string(dtype, std::vector<int64_t>(dims.begin(), dims.end()));
}

const AttributeValue* find_attribute(std::span<const CallbackAttribute> attrs, std::string_view name) {
  for (const auto& a : attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}

}  // namespace

std::string TensorView::shape() const { return shape_of(dtype, dims); }
std::string MutableTensorView::shape() const { return shape_of(dtype, dims); }

std::string attribute_to_string(const AttributeValue& v) {
  struct Visitor {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      std::ostringstream os;
      os << d;
      return os.str();
    }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
  };
  return std::visit(Visitor{}, v);
}

const AttributeValue* BlockingCall::attribute(std::string_view name) const { return find_attribute(attributes_, name); }
const AttributeValue* OrderedCall::attribute(std::string_view name) const { return find_attribute(attributes, name); }

Status BlockingCall::set_result(size_t index, const TensorView& value) const {
  const std::string which = "result " + std::to_string(index) + " of host callback '" + std::string(name_) + "'";
  if (index >= results_.size())
    return invalid_argument(which + " does not exist: the program declares " + std::to_string(results_.size()) +
                            " result(s)");
  const MutableTensorView& out = results_[index];
  if (value.dtype != out.dtype || !std::ranges::equal(value.dims, out.dims))
    return invalid_argument(which + ": the program expects " + out.shape() + ", the host function gave " + value.shape());
  if (value.bytes.size() != out.bytes.size())
    return invalid_argument(which + ": " + std::to_string(value.bytes.size()) + " bytes given, " + out.shape() +
                            " takes " + std::to_string(out.bytes.size()));
  if (!out.bytes.empty()) std::memcpy(out.bytes.data(), value.bytes.data(), out.bytes.size());
  return ok();
}

Status BlockingCall::set_result(size_t index, const io::HostArray& value) const {
  return set_result(index, TensorView{value.dtype, value.dims, value.data});
}

bool valid_callback_name(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::ranges::all_of(name, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' || c == '-';
  });
}

struct HostCallbacks::Impl {
  std::mutex mutex;  // guards `entries` until frozen; afterwards they are read without it
  std::map<std::string, Entry, std::less<>> entries;
  mutable std::atomic<bool> frozen{false};
  mutable std::atomic<uint64_t> executions{0};
};

HostCallbacks::HostCallbacks() : impl_(std::make_unique<Impl>()), delivery_(std::make_unique<OrderedDelivery>()) {}
HostCallbacks::~HostCallbacks() = default;

Status HostCallbacks::add(std::string name, CallbackKind kind, BlockingFunction blocking, OrderedFunction ordered) {
  if (!valid_callback_name(name))
    return invalid_argument("'" + name +
                            "' cannot name a host callback: use letters, digits, '_', '.', '$' or '-', starting "
                            "with a letter or '_'");
  if ((kind == CallbackKind::kBlocking && !blocking) || (kind == CallbackKind::kOrdered && !ordered))
    return invalid_argument("host callback '" + name + "' has no function");
  std::lock_guard lock(impl_->mutex);
  if (impl_->frozen.load())
    return make_error(Code::kFailedPrecondition, "host callback '" + name +
                                                     "' cannot be added: this receiver has run executions already, "
                                                     "and its bindings are fixed");
  if (impl_->entries.contains(name))
    return make_error(Code::kAlreadyExists, "host callback '" + name + "' is bound already in this receiver");
  Entry entry{name, kind, std::move(blocking), std::move(ordered)};
  impl_->entries.emplace(std::move(name), std::move(entry));
  return ok();
}

Status HostCallbacks::add_blocking(std::string name, BlockingFunction fn) {
  return add(std::move(name), CallbackKind::kBlocking, std::move(fn), nullptr);
}
Status HostCallbacks::add_ordered(std::string name, OrderedFunction fn) {
  return add(std::move(name), CallbackKind::kOrdered, nullptr, std::move(fn));
}

std::vector<std::string> HostCallbacks::names() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<std::string> out;
  for (const auto& [name, entry] : impl_->entries) out.push_back(name);
  return out;
}

void HostCallbacks::freeze() const {
  if (impl_->frozen.load(std::memory_order_acquire)) return;
  std::lock_guard lock(impl_->mutex);
  impl_->frozen.store(true, std::memory_order_release);
}

const HostCallbacks::Entry* HostCallbacks::bound_entry(std::string_view name) const {
  // Before freeze() the entries may still change under a concurrent add: nothing is read then.
  if (!impl_->frozen.load(std::memory_order_acquire)) return nullptr;
  auto it = impl_->entries.find(name);
  return it == impl_->entries.end() ? nullptr : &it->second;
}

uint64_t HostCallbacks::next_execution() const { return impl_->executions.fetch_add(1) + 1; }

}  // namespace plugboard
