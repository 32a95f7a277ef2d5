#include "abi/api.h"

namespace plugboard::abi {

Error Api::take_error(PJRT_Error* error, std::string_view function) const {
  // PJRT_Error_Destroy, _Message and _GetCode are the first three slots of every PJRT_Api.
  Code code = Code::kUnknown;
  std::string message;
  if (covers(offsetof(PJRT_Api, PJRT_Error_GetCode))) {
    auto args = PB_PJRT_ARGS(PJRT_Error_GetCode_Args);
    args.error = error;
    if (raw_->PJRT_Error_GetCode(&args) == nullptr) code = static_cast<Code>(enum_value(args.code));
  }
  if (covers(offsetof(PJRT_Api, PJRT_Error_Message))) {
    auto args = PB_PJRT_ARGS(PJRT_Error_Message_Args);
    args.error = error;
    raw_->PJRT_Error_Message(&args);
    message.assign(view(args.message, args.message_size));
  }
  if (covers(offsetof(PJRT_Api, PJRT_Error_Destroy))) {
    auto args = PB_PJRT_ARGS(PJRT_Error_Destroy_Args);
    args.error = error;
    raw_->PJRT_Error_Destroy(&args);
  }
  if (code == Code::kOk) code = Code::kUnknown;  // a returned error is never OK
  if (message.empty()) message = "(the plugin gave no message)";
  Error e(code, std::move(message));
  e.annotate(std::string(function) + " in " + label_);
  return e;
}

Error Api::missing_function(std::string_view function, size_t offset) const {
  if (raw_ && raw_->struct_size >= offset + sizeof(void*))
    return Error(Code::kUnimplemented, label_ + ": the plugin's PJRT_Api has a null " + std::string(function));
  return Error(Code::kUnimplemented,
               label_ + ": the plugin's PJRT_Api (struct_size " + std::to_string(struct_size()) +
                   ") is too small to hold " + std::string(function) + " (needs " +
                   std::to_string(offset + sizeof(void*)) + " bytes)");
}

std::string pjrt_type_name(int t) {
  switch (static_cast<PJRT_Buffer_Type>(t)) {
    case PJRT_Buffer_Type_INVALID: return "INVALID";
    case PJRT_Buffer_Type_PRED: return "PRED";
    case PJRT_Buffer_Type_S8: return "S8";
    case PJRT_Buffer_Type_S16: return "S16";
    case PJRT_Buffer_Type_S32: return "S32";
    case PJRT_Buffer_Type_S64: return "S64";
    case PJRT_Buffer_Type_U8: return "U8";
    case PJRT_Buffer_Type_U16: return "U16";
    case PJRT_Buffer_Type_U32: return "U32";
    case PJRT_Buffer_Type_U64: return "U64";
    case PJRT_Buffer_Type_F16: return "F16";
    case PJRT_Buffer_Type_F32: return "F32";
    case PJRT_Buffer_Type_F64: return "F64";
    case PJRT_Buffer_Type_BF16: return "BF16";
    case PJRT_Buffer_Type_C64: return "C64";
    case PJRT_Buffer_Type_C128: return "C128";
    case PJRT_Buffer_Type_F8E5M2: return "F8E5M2";
    case PJRT_Buffer_Type_F8E4M3FN: return "F8E4M3FN";
    case PJRT_Buffer_Type_F8E4M3B11FNUZ: return "F8E4M3B11FNUZ";
    case PJRT_Buffer_Type_F8E5M2FNUZ: return "F8E5M2FNUZ";
    case PJRT_Buffer_Type_F8E4M3FNUZ: return "F8E4M3FNUZ";
    case PJRT_Buffer_Type_S4: return "S4";
    case PJRT_Buffer_Type_U4: return "U4";
    case PJRT_Buffer_Type_TOKEN: return "TOKEN";
    case PJRT_Buffer_Type_S2: return "S2";
    case PJRT_Buffer_Type_U2: return "U2";
    case PJRT_Buffer_Type_F8E4M3: return "F8E4M3";
    case PJRT_Buffer_Type_F8E3M4: return "F8E3M4";
    case PJRT_Buffer_Type_F8E8M0FNU: return "F8E8M0FNU";
    case PJRT_Buffer_Type_F4E2M1FN: return "F4E2M1FN";
  }
  return "PJRT_Buffer_Type(" + std::to_string(t) + ")";
}

}  // namespace plugboard::abi
