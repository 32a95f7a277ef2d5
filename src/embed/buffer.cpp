// The facade's Buffer: owns one runtime buffer.
#include "base/no_throw.h"
#include "callback/ordered_delivery.h"
#include "embed/handles.h"

namespace plugboard::api {

Buffer wrap_buffer(plugboard::Buffer buffer) { return Buffer(std::make_unique<Buffer::Impl>(Buffer::Impl{std::move(buffer)})); }

Buffer::Buffer() noexcept = default;
Buffer::Buffer(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Buffer::Buffer(Buffer&&) noexcept = default;
Buffer& Buffer::operator=(Buffer&&) noexcept = default;
Buffer::~Buffer() = default;

bool Buffer::valid() const noexcept { return impl_ && impl_->buffer.valid(); }
DType Buffer::dtype() const noexcept { return impl_ ? impl_->buffer.dtype() : DType::kInvalid; }
std::span<const int64_t> Buffer::dims() const noexcept {
  return impl_ ? impl_->buffer.dims() : std::span<const int64_t>();
}
size_t Buffer::byte_size() const noexcept { return valid() ? impl_->buffer.byte_size() : 0; }
int Buffer::device() const noexcept { return impl_ ? impl_->buffer.device_index() : -1; }
bool Buffer::donatable() const noexcept { return impl_ && impl_->buffer.donatable(); }

namespace {
// `inner`: the runtime buffer, where the facade's has one (a donated one says it was donated).
Status require_valid(const Buffer& b, const plugboard::Buffer* inner) {
  if (b.valid()) return ok();
  if (inner) return std::unexpected(inner->empty_error());
  return make_error(Code::kFailedPrecondition, "the buffer is empty (default-constructed or moved from)");
}
}  // namespace

Status Buffer::to_host(std::span<std::byte> dst) const noexcept {
  return no_throw("copying to the host", [&]() -> Status {
    PB_RETURN_IF_ERROR(require_valid(*this, impl_ ? &impl_->buffer : nullptr));
    return impl_->buffer.to_host(dst);
  });
}

Expected<std::vector<std::byte>> Buffer::to_host() const noexcept {
  return no_throw("copying to the host", [&]() -> Expected<std::vector<std::byte>> {
    PB_RETURN_IF_ERROR(require_valid(*this, impl_ ? &impl_->buffer : nullptr));
    return impl_->buffer.to_host();
  });
}

Expected<uintptr_t> Buffer::device_pointer() const noexcept {
  return no_throw("reading a buffer's device address", [&]() -> Expected<uintptr_t> {
    PB_RETURN_IF_ERROR(require_valid(*this, impl_ ? &impl_->buffer : nullptr));
    return impl_->buffer.device_pointer();
  });
}

Status Buffer::to_host_async(std::span<std::byte> dst, std::function<void(Status)> done) const noexcept {
  return no_throw("copying to the host", [&]() -> Status {
    PB_RETURN_IF_ERROR(require_valid(*this, impl_ ? &impl_->buffer : nullptr));
    if (!done) return invalid_argument("to_host_async needs a function to call when the copy is done");
    PB_ASSIGN_OR_RETURN(plugboard::Event copied, impl_->buffer.to_host_async(dst));
    // From the plugin's thread, handed to a delivery thread: the caller's function never runs on a
    // plugin thread.
    return copied.on_ready(
        [done = std::move(done)](Status s) mutable { deliver_on_pool(std::move(done), std::move(s)); });
  });
}

}  // namespace plugboard::api
