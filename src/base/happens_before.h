// Telling ThreadSanitizer about the orderings it cannot see: a plugin hands work between its own
// threads through its own (uninstrumented) synchronization. Annotated: an execution's state,
// published by the launching thread before PJRT_LoadedExecutable_Execute and read by the plugin's
// threads in the FFI handler; a blocking host function's writes, released when it returns and
// acquired by await() after the event; and an event continuation, made by the registering thread and
// run by whichever plugin thread fires the event. No code outside TSan builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define PB_HAPPENS_BEFORE(addr) __tsan_release(static_cast<void*>(addr))
#define PB_HAPPENS_AFTER(addr) __tsan_acquire(static_cast<void*>(addr))
#else
#define PB_HAPPENS_BEFORE(addr) ((void)(addr))
#define PB_HAPPENS_AFTER(addr) ((void)(addr))
#endif
