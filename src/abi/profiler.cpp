#include "abi/profiler.h"

#include <cstring>
#include <vector>

namespace plugboard::abi {
namespace {

constexpr size_t kExtensionEnd = offsetof(PB_PJRT_Profiler_Extension, profiler_api) + sizeof(void*);
constexpr size_t kTableEnd = offsetof(PB_PLUGIN_Profiler_Api, collect_data) + sizeof(void*);

std::string where(const Api& api, std::string_view fn) {
  return std::string(fn) + " in " + api.label();
}

// The plugin's profiler error as an Error (its message and code), the plugin's error freed.
Error take_profiler_error(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler_Error* error,
                          std::string_view fn) {
  std::string message = "(no message)";
  PB_PLUGIN_Profiler_Error_Message_Args m{};
  m.struct_size = sizeof(m);
  m.priv = table.priv;
  m.error = error;
  table.error_message(&m);
  if (m.message && m.message_size > 0 && m.message_size < (size_t{1} << 20)) message.assign(m.message, m.message_size);
  int code = static_cast<int>(Code::kUnknown);
  PB_PLUGIN_Profiler_Error_GetCode_Args c{};
  c.struct_size = sizeof(c);
  c.priv = table.priv;
  c.error = error;
  if (table.error_get_code(&c) == nullptr && c.code > 0 && c.code <= 16) code = c.code;
  PB_PLUGIN_Profiler_Error_Destroy_Args d{};
  d.struct_size = sizeof(d);
  d.priv = table.priv;
  d.error = error;
  table.error_destroy(&d);
  return Error(static_cast<Code>(code), where(api, fn) + ": " + message);
}

Status call(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler_Error* error, std::string_view fn) {
  if (error) return std::unexpected(take_profiler_error(api, table, error, fn));
  return ok();
}

Status handle_call(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler_Handle_Fn* fn,
                   PB_PLUGIN_Profiler* profiler, std::string_view name) {
  PB_PLUGIN_Profiler_Handle_Args args{};
  args.struct_size = sizeof(args);
  args.profiler = profiler;
  return call(api, table, fn(&args), name);
}

}  // namespace

Expected<const PB_PLUGIN_Profiler_Api*> find_profiler_api(const Api& api) {
  if (!api.raw()) return make_error(Code::kFailedPrecondition, "no PJRT API");
  const PJRT_Extension_Base* ext = api.raw()->extension_start;
  for (int n = 0; ext && n < 64; ++n, ext = ext->next) {
    if (ext->struct_size < sizeof(PJRT_Extension_Base)) break;  // a corrupt chain: the loader refuses it
    if (enum_value(ext->type) != static_cast<int>(PJRT_Extension_Type_Profiler)) continue;
    if (ext->struct_size < kExtensionEnd)
      return make_error(Code::kUnimplemented, "plugin " + api.label() + " has a profiler extension of " +
                                                  std::to_string(ext->struct_size) + " bytes, an older layout (needs " +
                                                  std::to_string(kExtensionEnd) + "): its profiler is not collected");
    const auto* profiler = reinterpret_cast<const PB_PJRT_Profiler_Extension*>(ext);
    const PB_PLUGIN_Profiler_Api* table = profiler->profiler_api;
    if (!table) return make_error(Code::kUnimplemented, "plugin " + api.label() + " has a profiler extension without a profiler");
    if (table->struct_size < kTableEnd)
      return make_error(Code::kUnimplemented, "plugin " + api.label() + " has a profiler table of " +
                                                  std::to_string(table->struct_size) + " bytes (needs " +
                                                  std::to_string(kTableEnd) + "): its profiler is not collected");
    if (!table->error_destroy || !table->error_message || !table->error_get_code || !table->create ||
        !table->destroy || !table->start || !table->stop || !table->collect_data)
      return make_error(Code::kUnimplemented, "plugin " + api.label() + " has a profiler table with a null function");
    return table;
  }
  return make_error(Code::kUnimplemented, "plugin " + api.label() + " has no profiler extension");
}

Expected<PB_PLUGIN_Profiler*> profiler_create(const Api& api, const PB_PLUGIN_Profiler_Api& table,
                                              std::string_view options) {
  PB_PLUGIN_Profiler_Create_Args args{};
  args.struct_size = sizeof(args);
  args.options = options.data();
  args.options_size = options.size();
  PB_RETURN_IF_ERROR(call(api, table, table.create(&args), "PLUGIN_Profiler_Create"));
  if (!args.profiler)
    return make_error(Code::kInternal, where(api, "PLUGIN_Profiler_Create") + " gave a null profiler without an error");
  return args.profiler;
}

Status profiler_start(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler* profiler) {
  return handle_call(api, table, table.start, profiler, "PLUGIN_Profiler_Start");
}
Status profiler_stop(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler* profiler) {
  return handle_call(api, table, table.stop, profiler, "PLUGIN_Profiler_Stop");
}
Status profiler_destroy(const Api& api, const PB_PLUGIN_Profiler_Api& table, PB_PLUGIN_Profiler* profiler) {
  return handle_call(api, table, table.destroy, profiler, "PLUGIN_Profiler_Destroy");
}

Expected<std::string> profiler_collect(const Api& api, const PB_PLUGIN_Profiler_Api& table,
                                       PB_PLUGIN_Profiler* profiler, size_t max_bytes) {
  constexpr std::string_view kFn = "PLUGIN_Profiler_CollectData";
  PB_PLUGIN_Profiler_CollectData_Args args{};
  args.struct_size = sizeof(args);
  args.profiler = profiler;
  args.buffer = nullptr;
  PB_RETURN_IF_ERROR(call(api, table, table.collect_data(&args), kFn));
  const size_t size = args.buffer_size_in_bytes;
  if (size == 0) return std::string();
  if (size > max_bytes)
    return make_error(Code::kResourceExhausted, where(api, kFn) + ": " + std::to_string(size) +
                                                    " bytes of profile data, more than the " +
                                                    std::to_string(max_bytes) + " plugboard reads");
  // XLA's plugins (jax-cuda's among them) answer the first call with the data itself, in a buffer the
  // profiler owns until it is destroyed (one byte longer than the XSpace: xspace::decode reads past
  // that zero), and ignore a second call. Others give the size, then fill the caller's buffer.
  if (args.buffer != nullptr) return std::string(reinterpret_cast<const char*>(args.buffer), size);
  std::string bytes(size, '\0');
  args.buffer = reinterpret_cast<uint8_t*>(bytes.data());
  PB_RETURN_IF_ERROR(call(api, table, table.collect_data(&args), kFn));
  if (args.buffer_size_in_bytes < size) bytes.resize(args.buffer_size_in_bytes);
  return bytes;
}

}  // namespace plugboard::abi
