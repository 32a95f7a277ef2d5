// Raw device addresses, for frameworks that share device memory with plugboard (Nx's to_pointer and
// from_pointer, DLPack-like hand-offs): a buffer's address on its device (PJRT_Buffer_UnsafePointer),
// and a buffer that views device memory someone else owns (PJRT_Client_CreateViewOfDeviceBuffer).
// Both functions are guarded by the plugin's struct_size like every other call.
#include <atomic>
#include <cstdio>
#include <string>

#include "abi/api.h"
#include "base/no_throw.h"
#include "runtime/buffer.h"
#include "runtime/client.h"

namespace plugboard {
namespace {

// The state behind a view's on_delete callback. Two references: the caller's (dropped once the call
// returns) and the plugin's (dropped when it calls on_delete). A plugin that fails the call never
// calls on_delete afterwards (it may have called it inside the call), so on failure the caller takes
// back the plugin's reference unless the callback already ran.
class ViewRelease {
 public:
  explicit ViewRelease(std::function<void()> fn) noexcept : fn_(std::move(fn)) {}

  // The plugin's on_delete.
  static void on_delete(void* /*device_buffer_ptr*/, void* arg) noexcept {
    auto* self = static_cast<ViewRelease*>(arg);
    self->run();
    self->unref(1);
  }
  // The call succeeded: the plugin holds its reference until on_delete.
  void created() noexcept { unref(1); }
  // The call failed: the function runs now (unless the plugin ran it), and both references go.
  void failed() noexcept {
    const bool plugin_ran = ran_.load(std::memory_order_acquire);
    run();
    unref(plugin_ran ? 1 : 2);
  }

 private:
  void run() noexcept {
    if (ran_.exchange(true, std::memory_order_acq_rel)) return;
    try {
      fn_();
    } catch (...) {
      // Nobody to report to on the plugin's thread: documented as must-not-throw.
    }
    fn_ = nullptr;  // what it captured goes now, not with the last reference
  }
  void unref(int n) noexcept {
    if (refs_.fetch_sub(n, std::memory_order_acq_rel) == n) delete this;
  }

  std::function<void()> fn_;
  std::atomic<bool> ran_{false};
  std::atomic<int> refs_{2};
};

// The on_delete of a view without on_release. Always passing one: XLA's CPU client of PJRT 0.81 calls
// the callback it wraps whether or not one was given (std::bad_function_call, out of the plugin).
void ignore_delete(void* /*device_buffer_ptr*/, void* /*user_arg*/) noexcept {}

}  // namespace

Expected<uintptr_t> Buffer::device_pointer() const noexcept {
  return no_throw("reading a buffer's device address", [&]() -> Expected<uintptr_t> {
    if (!handle_) return std::unexpected(empty_error());
    const abi::Api& api = client_->plugin().api();
    auto args = PB_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args);
    args.buffer = handle_;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Buffer_UnsafePointer, args),
                                "the device address of a " + shape_string() + " buffer of " + client_->label()));
    return args.buffer_pointer;
  });
}

Expected<Buffer> Client::view_of_device_memory(uintptr_t address, DType dtype, std::span<const int64_t> dims,
                                               int device_index, std::function<void()> on_release) const noexcept {
  bool handed_over = false;  // true once `on_release` is the ViewRelease's to run
  Expected<Buffer> made = no_throw("making a view of device memory", [&]() -> Expected<Buffer> {
    char hex[2 * sizeof(uintptr_t) + 1];
    std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(address));
    const std::string what = "a view of device memory at 0x" + std::string(hex) + " on " + label();
    if (address == 0) return invalid_argument(what + ": address 0 is not device memory");
    PB_RETURN_IF_ERROR(annotate(check_array(byte_size(dtype, dims).value_or(0), dtype, dims, device_index), what));
    const abi::Api& api = plugin_->api();
    if (!PB_PJRT_HAS(api, PJRT_Client_CreateViewOfDeviceBuffer))
      return std::unexpected(api.missing_function("PJRT_Client_CreateViewOfDeviceBuffer",
                                                  offsetof(PJRT_Api, PJRT_Client_CreateViewOfDeviceBuffer))
                                 .annotate(what));
    Dims shape(dims);  // made before the call: nothing between the call and the Buffer may throw
    ViewRelease* release = nullptr;
    if (on_release) {
      release = new ViewRelease(std::move(on_release));
      handed_over = true;
    }
    auto args = PB_PJRT_ARGS(PJRT_Client_CreateViewOfDeviceBuffer_Args);
    args.client = client_;
    args.device_buffer_ptr = reinterpret_cast<void*>(address);
    args.dims = dims.data();
    args.num_dims = dims.size();
    args.element_type = abi::to_pjrt(dtype);
    args.layout = nullptr;  // row-major, the plugin's default
    args.device = device_handles_[static_cast<size_t>(device_index)];
    args.on_delete_callback = release ? &ViewRelease::on_delete : &ignore_delete;
    args.on_delete_callback_arg = release;
    Status called;
    try {
      called = PB_PJRT_CALL(api, PJRT_Client_CreateViewOfDeviceBuffer, args);
    } catch (...) {  // only the error path allocates (the plugin's message)
      if (release) release->failed();
      throw;
    }
    if (called && !args.buffer) {
      if (release) release->failed();
      return make_error(Code::kInternal, "PJRT_Client_CreateViewOfDeviceBuffer in " + api.label() +
                                             " returned a null buffer without an error: " + what);
    }
    if (!called) {
      if (release) release->failed();
      return std::unexpected(std::move(called).error().annotate(what));
    }
    if (release) release->created();
    Buffer view(shared_from_this(), args.buffer, dtype, std::move(shape), device_index);
    view.view_ = BufferView::kForeignDevice;
    return view;
  });
  // Refused before the plugin had it: the caller's function runs here, once.
  if (!made && !handed_over && on_release) {
    try {
      on_release();
    } catch (...) {
    }
  }
  return made;
}

}  // namespace plugboard
