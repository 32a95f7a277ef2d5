// The facade's Executable: signature, introspection of the host callbacks a program needs, and
// execute (with or without a receiver).
#include <algorithm>

#include "base/no_throw.h"
#include "callback/registry.h"
#include "embed/handles.h"

namespace plugboard::api {

namespace {

std::vector<ArrayType> to_types(const std::vector<plugboard::ArrayType>& in) {
  std::vector<ArrayType> out;
  out.reserve(in.size());
  for (const auto& t : in) out.push_back({t.dtype, t.dims.to_vector()});
  return out;
}

// The runtime buffers under the facade's, in place: a small list stays on the stack.
constexpr size_t kInlineArgs = 16;

}  // namespace

const std::string& Executable::name() const noexcept { return impl_->name; }
const CompileReport& Executable::compile_report() const noexcept { return impl_->report; }

namespace {
compile_cache::Origin origin_of(ExecutableSource source) {
  switch (source) {
    case ExecutableSource::kCompiled: return compile_cache::Origin::kCompiled;
    case ExecutableSource::kCompileCache: return compile_cache::Origin::kCompileCache;
    case ExecutableSource::kPrecompiled: return compile_cache::Origin::kPrecompiled;
  }
  return compile_cache::Origin::kCompiled;
}
}  // namespace

std::string CompileReport::to_string() const { return compile_cache::describe(origin_of(source), ms); }
const char* CompileReport::source_id() const { return compile_cache::origin_id(origin_of(source)); }
bool Executable::parameters_known() const noexcept { return impl_->executable->signature().parameters_known; }

std::vector<ArrayType> Executable::parameters() const noexcept {
  try {
    return to_types(impl_->executable->signature().parameters);
  } catch (...) {
    return {};
  }
}

std::vector<ArrayType> Executable::results() const noexcept {
  try {
    return to_types(impl_->executable->signature().results);
  } catch (...) {
    return {};
  }
}

std::optional<std::vector<std::string>> Executable::custom_call_targets() const noexcept {
  try {
    return impl_->executable->signature().custom_call_targets;
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<std::string> Executable::host_callbacks_needed() const noexcept {
  try {
    const auto& targets = impl_->executable->signature().custom_call_targets;
    if (!targets) return {};
    const std::vector<std::string> declared = declared_callback_targets(*impl_->executable->client());
    std::vector<std::string> out;
    for (const std::string& t : *targets)
      if (std::find(declared.begin(), declared.end(), t) != declared.end()) out.push_back(t);
    return out;
  } catch (...) {
    return {};
  }
}

Status Executable::check_receiver(const HostCallbacks& receiver) const noexcept {
  return no_throw("checking a receiver", [&]() -> Status {
    const std::vector<std::string> bound = receiver.names();
    std::string missing;
    for (const std::string& needed : host_callbacks_needed())
      if (std::find(bound.begin(), bound.end(), needed) == bound.end()) missing += (missing.empty() ? "" : ", ") + needed;
    if (!missing.empty())
      return make_error(Code::kNotFound, impl_->name + " calls host callback(s) the receiver does not bind: " + missing);
    return ok();
  });
}

Expected<Execution> Executable::execute(std::span<Buffer* const> args, const ExecuteOptions& options) const noexcept {
  return no_throw("executing", [&]() -> Expected<Execution> {
    plugboard::Buffer* inline_args[kInlineArgs];
    std::vector<plugboard::Buffer*> heap_args;
    plugboard::Buffer** runtime_args = inline_args;
    if (args.size() > kInlineArgs) runtime_args = (heap_args.resize(args.size()), heap_args.data());
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i] || !args[i]->impl())
        return invalid_argument("argument " + std::to_string(i) + " of " + impl_->name + " is " +
                                (args[i] ? "an empty buffer" : "null"));
      runtime_args[i] = &args[i]->impl()->buffer;
    }
    const std::span<plugboard::Buffer* const> runtime_span(runtime_args, args.size());
    plugboard::ExecuteOptions runtime_options;
    runtime_options.device = options.device;
    runtime_options.donate = options.donate;

    auto impl = std::make_unique<Execution::Impl>();
    impl->executable = impl_->executable;
    std::vector<plugboard::Buffer> outputs;
    if (options.callbacks) {
      PB_ASSIGN_OR_RETURN(plugboard::CallbackExecution run,
                          execute_with_callbacks_async(*impl_->executable, runtime_span,
                                                       options.callbacks->impl()->receiver, std::move(runtime_options)));
      outputs = std::move(run.outputs);
      impl->with_callbacks.emplace(std::move(run));
    } else {
      PB_ASSIGN_OR_RETURN(plugboard::Execution run, impl_->executable->execute_async(runtime_span, runtime_options));
      outputs = std::move(run.outputs);
      impl->done = std::move(run.done);
      impl->device_span = std::move(run.device_span);
    }
    impl->outputs.reserve(outputs.size());
    for (plugboard::Buffer& b : outputs) impl->outputs.push_back(wrap_buffer(std::move(b)));
    return Execution(std::move(impl));
  });
}

std::vector<int> Executable::devices() const noexcept {
  try {
    return impl_->executable->devices();
  } catch (...) {
    return {};
  }
}

Expected<std::vector<Execution>> Executable::execute_partitioned(std::span<const std::vector<Buffer*>> args,
                                                                 const ExecuteOptions& options) const noexcept {
  return no_throw("executing on several devices", [&]() -> Expected<std::vector<Execution>> {
    if (options.callbacks)
      return invalid_argument(impl_->name + ": a partitioned execution carries no host callbacks (ExecuteOptions::callbacks)");
    if (const std::vector<std::string> needed = host_callbacks_needed(); !needed.empty())
      return invalid_argument(impl_->name + " calls host callback " + needed.front() +
                              ": a partitioned execution carries no host callbacks");
    std::vector<std::vector<plugboard::Buffer*>> runtime_args(args.size());
    for (size_t k = 0; k < args.size(); ++k)
      for (size_t i = 0; i < args[k].size(); ++i) {
        Buffer* b = args[k][i];
        if (!b || !b->impl())
          return invalid_argument("argument " + std::to_string(i) + " of argument list " + std::to_string(k) + " of " +
                                  impl_->name + " is " + (b ? "an empty buffer" : "null"));
        runtime_args[k].push_back(&b->impl()->buffer);
      }
    plugboard::ExecuteOptions runtime_options;
    runtime_options.device = options.device;
    runtime_options.donate = options.donate;
    PB_ASSIGN_OR_RETURN(std::vector<plugboard::Execution> runs,
                        impl_->executable->execute_partitioned(runtime_args, runtime_options));
    std::vector<Execution> out;
    out.reserve(runs.size());
    for (plugboard::Execution& run : runs) {
      auto impl = std::make_unique<Execution::Impl>();
      impl->executable = impl_->executable;
      impl->done = std::move(run.done);
      impl->device_span = std::move(run.device_span);
      impl->outputs.reserve(run.outputs.size());
      for (plugboard::Buffer& b : run.outputs) impl->outputs.push_back(wrap_buffer(std::move(b)));
      out.emplace_back(std::move(impl));
    }
    return out;
  });
}

}  // namespace plugboard::api
