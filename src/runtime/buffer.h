// An owned PJRT_Buffer on one device of a client. Keeps its client (and so its plugin) alive: the
// caller may drop the client first. Its dtype and dims are cached at creation, so asking costs no
// call into the plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/dims.h"
#include "base/dtype.h"
#include "base/status.h"
#include "runtime/event.h"
#include "runtime/pjrt_handles.h"

namespace plugboard {

namespace trace {
class Deferred;
}

class Client;

// Memory a buffer uses without owning it, which an execution must never take by donation.
enum class BufferView {
  kNone,           // the buffer's own memory (or memory given up to it): donatable
  kImmutableHost,  // immutable host memory, zero-copy (Client::buffer_from_host_adopt, kImmutable)
  kForeignDevice,  // device memory someone else owns (Client::view_of_device_memory)
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  // False for a default-constructed, moved-from or donated buffer.
  bool valid() const { return handle_ != nullptr; }
  DType dtype() const { return dtype_; }
  std::span<const int64_t> dims() const { return dims_.span(); }
  size_t element_count() const;
  size_t byte_size() const;
  // Index of its device in client().devices().
  int device_index() const { return device_index_; }
  // False for a view of memory the buffer does not own (see BufferView): an execution refuses to
  // take it by donation.
  bool donatable() const { return view_ == BufferView::kNone; }
  // True once an execution took it by donation (until it is given another buffer): every use then
  // fails saying so, not that the buffer is merely empty.
  bool donated() const { return donated_; }
  // FAILED_PRECONDITION for a use of this buffer while it is empty: donated (naming its shape), or
  // moved from / default-constructed.
  Error empty_error() const;
  BufferView view() const { return view_; }
  const std::shared_ptr<const Client>& client() const { return client_; }

  // Completes when the buffer's contents are computed or transferred.
  Expected<Event> ready_event() const;
  // Copies the contents into `dst`, which must be exactly byte_size() bytes; blocks until done.
  Status to_host(std::span<std::byte> dst) const noexcept;
  // Starts the copy; `dst` must stay valid until the returned event fires.
  Expected<Event> to_host_async(std::span<std::byte> dst) const;
  // Convenience: a fresh vector with the contents.
  Expected<std::vector<std::byte>> to_host() const noexcept;

  // The platform-dependent address of the buffer's memory on its device (PJRT_Buffer_UnsafePointer;
  // on CPU a host address). Valid only while this buffer lives and is not donated; the plugin may
  // first wait for the contents to be defined. UNIMPLEMENTED, naming the plugin, when its table does
  // not reach the function. (device_address.cpp)
  Expected<uintptr_t> device_pointer() const noexcept;

  PJRT_Buffer* raw() const { return handle_; }
  // "f32[4,8]"
  std::string shape_string() const;

 private:
  friend class Client;
  friend class Executable;
  // PJRT_Buffer_ToHostBuffer into `dst` (checked), traced on the calling thread; `on_device` receives
  // the copy's span for the device's track, started at the call, for the caller to end when the
  // bytes are there (empty when tracing is off).
  Expected<Event> start_to_host(std::span<std::byte> dst, trace::Deferred& on_device) const;
  Buffer(std::shared_ptr<const Client> client, PJRT_Buffer* handle, DType dtype, Dims dims, int device_index)
      : client_(std::move(client)), handle_(handle), dtype_(dtype), dims_(std::move(dims)),
        device_index_(device_index) {}
  // Destroys the handle now (also after the plugin consumed the buffer by donation).
  void reset();
  // An execution took it by donation: the handle goes, and the buffer says so from now on.
  void give_up() {
    reset();
    donated_ = true;
  }
  // Releases the handle it holds and takes `handle` (an execution's output) in its place, keeping
  // the client reference when it is the same client: reusing a Buffer costs no reference count.
  void rebind(const std::shared_ptr<const Client>& client, PJRT_Buffer* handle, DType dtype, int device_index);

  std::shared_ptr<const Client> client_;
  PJRT_Buffer* handle_ = nullptr;
  DType dtype_ = DType::kInvalid;
  Dims dims_;
  int device_index_ = 0;
  BufferView view_ = BufferView::kNone;
  bool donated_ = false;
};

}  // namespace plugboard
