#include "runtime/buffer.h"

#include "base/no_throw.h"
#include "abi/api.h"
#include "runtime/client.h"
#include "runtime/traced_event.h"

namespace plugboard {

Buffer::Buffer(Buffer&& other) noexcept
    : client_(std::move(other.client_)), handle_(other.handle_), dtype_(other.dtype_),
      dims_(std::move(other.dims_)), device_index_(other.device_index_), view_(other.view_), donated_(other.donated_) {
  other.handle_ = nullptr;
  other.donated_ = false;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    client_ = std::move(other.client_);
    handle_ = other.handle_;
    dtype_ = other.dtype_;
    dims_ = std::move(other.dims_);
    device_index_ = other.device_index_;
    view_ = other.view_;
    donated_ = other.donated_;
    other.handle_ = nullptr;
    other.donated_ = false;
  }
  return *this;
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
  if (!handle_) return;
  auto args = PB_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = handle_;
  (void)PB_PJRT_CALL(client_->plugin().api(), PJRT_Buffer_Destroy, args);
  handle_ = nullptr;
}

void Buffer::rebind(const std::shared_ptr<const Client>& client, PJRT_Buffer* handle, DType dtype, int device_index) {
  reset();
  if (client_ != client) client_ = client;
  handle_ = handle;
  dtype_ = dtype;
  device_index_ = device_index;
  view_ = BufferView::kNone;
  donated_ = false;
}

// A buffer's dims were checked when it was made (Client::check_array for transfers, the output check in
// Executable::execute_async), so the checked products cannot fail here; 0 if they ever did.
size_t Buffer::element_count() const { return plugboard::element_count(dims_.span()).value_or(0); }

size_t Buffer::byte_size() const { return plugboard::byte_size(dtype_, dims_.span()).value_or(0); }

std::string Buffer::shape_string() const { return plugboard::shape_string(dtype_, dims_.to_vector()); }

Error Buffer::empty_error() const {
  if (donated_)
    return Error(Code::kFailedPrecondition,
                 "the " + shape_string() + " buffer was donated to an execution: its memory went to that execution");
  return Error(Code::kFailedPrecondition, "the buffer is empty (default-constructed or moved from)");
}

Expected<Event> Buffer::ready_event() const {
  if (!handle_) return std::unexpected(empty_error());
  const abi::Api& api = client_->plugin().api();
  auto args = PB_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = handle_;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Buffer_ReadyEvent, args));
  return Event(client_, args.event);
}

Expected<Event> Buffer::start_to_host(std::span<std::byte> dst, trace::Deferred& on_device) const {
  if (!handle_) return std::unexpected(empty_error());
  if (dst.size() != byte_size())
    return invalid_argument("destination holds " + std::to_string(dst.size()) + " bytes, the " + shape_string() +
                            " buffer needs " + std::to_string(byte_size()));
  trace::Scope span("copy_to_host", "transfer");
  span.arg("bytes", static_cast<int64_t>(dst.size())).arg("device", device_index_);
  const abi::Api& api = client_->plugin().api();
  auto args = PB_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = handle_;
  args.dst = dst.data();
  args.dst_size = dst.size();
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Buffer_ToHostBuffer, args));
  if (span) on_device = std::move(trace::Deferred("copy_to_host", "device", span.start_ns()).arg("bytes", static_cast<int64_t>(dst.size())));
  return Event(client_, args.event);
}

Expected<Event> Buffer::to_host_async(std::span<std::byte> dst) const {
  trace::Deferred on_device;
  PB_ASSIGN_OR_RETURN(Event copied, start_to_host(dst, on_device));
  // On the device's track: from the call until the plugin fires the event.
  finish_when_ready(copied, std::move(on_device), client_->devices()[static_cast<size_t>(device_index_)].trace_track);
  return copied;
}

Status Buffer::to_host(std::span<std::byte> dst) const noexcept {
  return no_throw("copying a buffer to the host", [&]() -> Status {
    if (dst.empty() && byte_size() == 0 && handle_) return ok();  // zero-size: nothing to copy
    trace::Scope span("to_host", "transfer");  // the copy and the wait for it
    span.arg("bytes", static_cast<int64_t>(dst.size()));
    trace::Deferred on_device;
    PB_ASSIGN_OR_RETURN(Event event, start_to_host(dst, on_device));
    Status copied = event.await();
    // Ended here, when the wait returns: no continuation is registered with the plugin for it.
    if (on_device)
      on_device.arg("status", trace_status(copied))
          .finish(client_->devices()[static_cast<size_t>(device_index_)].trace_track);
    return copied;
  });
}

Expected<std::vector<std::byte>> Buffer::to_host() const noexcept {
  return no_throw("copying a buffer to the host", [&]() -> Expected<std::vector<std::byte>> {
    std::vector<std::byte> out(byte_size());
    PB_RETURN_IF_ERROR(to_host(out));
    return out;
  });
}

}  // namespace plugboard
