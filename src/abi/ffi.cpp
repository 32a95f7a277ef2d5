#include "abi/ffi.h"

#include <algorithm>
#include <cstring>

namespace plugboard::abi {

namespace {

constexpr size_t kRegisterHandlerEnd = offsetof(PB_PJRT_FFI_Extension, register_handler) + sizeof(void*);

template <class Fn, class Args>
Status call_extension(const Api& api, Fn* fn, std::string_view name, Args* args) {
  if (!fn) return make_error(Code::kUnimplemented, "plugin " + api.label() + " has no FFI function " + std::string(name));
  if (PJRT_Error* error = fn(args)) return std::unexpected(api.take_error(error, name));
  return ok();
}

}  // namespace

Expected<const PB_PJRT_FFI_Extension*> find_ffi_extension(const Api& api) {
  if (!api.raw()) return make_error(Code::kFailedPrecondition, "no PJRT API");
  const PJRT_Extension_Base* ext = api.raw()->extension_start;
  for (int n = 0; ext && n < 64; ++n, ext = ext->next) {
    if (enum_value(ext->type) != static_cast<int>(PJRT_Extension_Type_FFI)) continue;
    if (ext->struct_size < kRegisterHandlerEnd)
      return make_error(Code::kUnimplemented,
                        "plugin " + api.label() + " has an FFI extension of " + std::to_string(ext->struct_size) +
                            " bytes, too old to register handlers (needs " + std::to_string(kRegisterHandlerEnd) +
                            "): host callbacks need a newer plugin");
    return reinterpret_cast<const PB_PJRT_FFI_Extension*>(ext);
  }
  return make_error(Code::kUnimplemented,
                    "plugin " + api.label() + " has no FFI extension: it cannot run host callbacks");
}

Expected<int64_t> ffi_register_type(const Api& api, const PB_PJRT_FFI_Extension& ext, std::string_view type_name) {
  // Some plugins (0.81) crash on a null type_info: always pass a zeroed one.
  static const PB_PJRT_FFI_Type_Info kNoTypeInfo{};
  PB_PJRT_FFI_Type_Register_Args args{};
  args.struct_size = sizeof(args);
  args.type_name = type_name.data();
  args.type_name_size = type_name.size();
  args.type_id = 0;
  args.type_info = &kNoTypeInfo;
  PB_RETURN_IF_ERROR(call_extension(api, ext.type_register, "PJRT_FFI_Type_Register", &args));
  if (args.type_id == 0)
    return make_error(Code::kInternal, "plugin " + api.label() + " assigned no type id to " + std::string(type_name));
  return args.type_id;
}

Status ffi_register_handler(const Api& api, const PB_PJRT_FFI_Extension& ext, std::string_view target,
                            std::string_view platform, XLA_FFI_Handler* handler) {
  PB_PJRT_FFI_Register_Handler_Args args{};
  args.struct_size = offsetof(PB_PJRT_FFI_Register_Handler_Args, traits) + sizeof(args.traits);
  args.target_name = target.data();
  args.target_name_size = target.size();
  args.handler = reinterpret_cast<void*>(handler);
  args.platform_name = platform.data();
  args.platform_name_size = platform.size();
  args.traits = 0;
  return call_extension(api, ext.register_handler, "PJRT_FFI_Register_Handler", &args);
}

Status ffi_add_user_data(const Api& api, const PB_PJRT_FFI_Extension& ext, PJRT_ExecuteContext* context,
                         int64_t type_id, void* data) {
  PB_PJRT_FFI_UserData_Add_Args args{};
  args.struct_size = sizeof(args);
  args.context = context;
  args.user_data.type_id = type_id;
  args.user_data.data = data;
  return call_extension(api, ext.user_data_add, "PJRT_FFI_UserData_Add", &args);
}

DType dtype_from_ffi(int t) {
  switch (t) {
    case XLA_FFI_DataType_PRED: return DType::kBool;
    case XLA_FFI_DataType_S8: return DType::kI8;
    case XLA_FFI_DataType_S16: return DType::kI16;
    case XLA_FFI_DataType_S32: return DType::kI32;
    case XLA_FFI_DataType_S64: return DType::kI64;
    case XLA_FFI_DataType_U8: return DType::kU8;
    case XLA_FFI_DataType_U16: return DType::kU16;
    case XLA_FFI_DataType_U32: return DType::kU32;
    case XLA_FFI_DataType_U64: return DType::kU64;
    case XLA_FFI_DataType_F16: return DType::kF16;
    case XLA_FFI_DataType_F32: return DType::kF32;
    case XLA_FFI_DataType_F64: return DType::kF64;
    case XLA_FFI_DataType_BF16: return DType::kBF16;
    case XLA_FFI_DataType_C64: return DType::kC64;
    case XLA_FFI_DataType_C128: return DType::kC128;
    case XLA_FFI_DataType_F8E5M2: return DType::kF8E5M2;
    case XLA_FFI_DataType_F8E4M3FN: return DType::kF8E4M3FN;
    default: return DType::kInvalid;
  }
}

XLA_FFI_Error_Code ffi_code(Code code) noexcept {
  const int v = static_cast<int>(code);
  return (v >= 1 && v <= 16) ? static_cast<XLA_FFI_Error_Code>(v) : XLA_FFI_Error_Code_UNKNOWN;
}

XLA_FFI_Error* ffi_error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const char* message) noexcept {
  if (!ffi_api_covers(api, offsetof(XLA_FFI_Api, XLA_FFI_Error_Create)) || !api->XLA_FFI_Error_Create) return nullptr;
  XLA_FFI_Error_Create_Args args{};
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = message;
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

bool ffi_answer_metadata(XLA_FFI_CallFrame* frame) noexcept {
  XLA_FFI_Extension_Base* ext = frame->extension_start;
  for (int n = 0; ext && n < 16; ++n, ext = ext->next) {
    if (ext->type != XLA_FFI_Extension_Metadata) continue;
    if (ext->struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE) return true;
    XLA_FFI_Metadata* md = reinterpret_cast<XLA_FFI_Metadata_Extension*>(ext)->metadata;
    if (!md) return true;
    // The version this plugin's FFI speaks, never above the header plugboard was built with: a plugin
    // rejects a handler that claims a newer one (and registration still reports success).
    int major = XLA_FFI_API_MAJOR, minor = XLA_FFI_API_MINOR;
    const XLA_FFI_Api* api = frame->api;
    if (api && api->struct_size >= offsetof(XLA_FFI_Api, api_version) + sizeof(XLA_FFI_Api_Version)) {
      const int pm = api->api_version.major_version, pn = api->api_version.minor_version;
      if (pm < major || (pm == major && pn < minor)) major = pm, minor = pn;
    }
    const size_t have = md->struct_size;
    if (have >= offsetof(XLA_FFI_Metadata, api_version) + sizeof(XLA_FFI_Api_Version)) {
      md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
      md->api_version.extension_start = nullptr;
      md->api_version.major_version = major;
      md->api_version.minor_version = minor;
    }
    if (have >= offsetof(XLA_FFI_Metadata, traits) + sizeof(XLA_FFI_Handler_Traits)) md->traits = 0;
    if (have >= offsetof(XLA_FFI_Metadata, state_type_id) + sizeof(XLA_FFI_TypeId)) md->state_type_id.type_id = 0;
    return true;
  }
  return false;
}

void* ffi_execution_user_data(const XLA_FFI_CallFrame* frame, int64_t type_id) noexcept {
  const XLA_FFI_Api* api = frame->api;
  if (!frame->ctx || !ffi_api_covers(api, offsetof(XLA_FFI_Api, XLA_FFI_ExecutionContext_Get)) ||
      !api->XLA_FFI_ExecutionContext_Get)
    return nullptr;
  XLA_FFI_TypeId id{type_id};
  XLA_FFI_ExecutionContext_Get_Args args{};
  args.struct_size = XLA_FFI_ExecutionContext_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  args.type_id = &id;
  if (XLA_FFI_Error* error = api->XLA_FFI_ExecutionContext_Get(&args)) {
    if (ffi_api_covers(api, offsetof(XLA_FFI_Api, XLA_FFI_Error_Destroy)) && api->XLA_FFI_Error_Destroy) {
      XLA_FFI_Error_Destroy_Args d{};
      d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
      d.error = error;
      api->XLA_FFI_Error_Destroy(&d);
    }
    return nullptr;
  }
  return args.data;
}

}  // namespace plugboard::abi
