// The baseline every dispatch figure is measured against: the raw C API's loop body, in the same
// binary. PJRT_LoadedExecutable_Execute with every argument non-donatable, PJRT_Event_Await on the
// completion event, then PJRT_Buffer_Destroy of each output. One object per thread.
#pragma once

#include <pjrt_c_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "bench_util.h"

namespace pbbench {

// Owns a raw PJRT_LoadedExecutable (raw_compile's), destroyed with it.
class RawExecutable {
 public:
  RawExecutable(const PJRT_Api* api, PJRT_LoadedExecutable* exe) : api_(api), exe_(exe) {}
  ~RawExecutable() {
    try {
      if (exe_) raw_executable_destroy(api_, exe_);
    } catch (...) {
    }
  }
  RawExecutable(const RawExecutable&) = delete;
  RawExecutable& operator=(const RawExecutable&) = delete;
  PJRT_LoadedExecutable* get() const { return exe_; }

 private:
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* exe_;
};

class RawExecution {
 public:
  static constexpr size_t kMax = 8;

  RawExecution(const PJRT_Api* api, PJRT_LoadedExecutable* exe, std::span<PJRT_Buffer* const> args, size_t n_out)
      : api_(api), exe_(exe), n_args_(args.size()), n_out_(n_out) {
    if (n_args_ > kMax || n_out_ > kMax) throw std::runtime_error("raw execution with more than 8 arguments or outputs");
    for (size_t i = 0; i < n_args_; ++i) {
      args_[i] = args[i];
      non_donatable_[i] = static_cast<int64_t>(i);
    }
  }

  // One execution, awaited; its outputs are destroyed unless `keep` (then output(i) holds them and
  // the caller destroys them).
  void run(bool keep = false) {
    RAW_ARGS(PJRT_ExecuteOptions, opts);
    opts.non_donatable_input_indices = non_donatable_;
    opts.num_non_donatable_input_indices = n_args_;
    PJRT_Buffer* const* arg_lists[1] = {args_};
    PJRT_Buffer** out_lists[1] = {outs_};
    PJRT_Event* done[1] = {nullptr};
    RAW_ARGS(PJRT_LoadedExecutable_Execute_Args, ex);
    ex.executable = exe_;
    ex.options = &opts;
    ex.argument_lists = arg_lists;
    ex.num_devices = 1;
    ex.num_args = n_args_;
    ex.output_lists = out_lists;
    ex.device_complete_events = done;
    raw_check(api_, api_->PJRT_LoadedExecutable_Execute(&ex), "PJRT_LoadedExecutable_Execute");
    raw_await_and_destroy(api_, done[0], "PJRT_Event_Await");
    if (!keep)
      for (size_t i = 0; i < n_out_; ++i) raw_buffer_destroy(api_, outs_[i]);
  }

  PJRT_Buffer* output(size_t i) const { return outs_[i]; }

 private:
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* exe_;
  PJRT_Buffer* args_[kMax] = {};
  int64_t non_donatable_[kMax] = {};
  PJRT_Buffer* outs_[kMax] = {};
  size_t n_args_, n_out_;
};

}  // namespace pbbench
