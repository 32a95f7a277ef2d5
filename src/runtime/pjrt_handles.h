// Opaque PJRT handle types, declared without the PJRT header so that public runtime headers stay
// free of it (the CLI and bindings include them). They match the header's `typedef struct X X;`.
#pragma once

extern "C" {
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_LoadedExecutable;
struct PJRT_Executable;
struct PJRT_ExecuteContext;
}
