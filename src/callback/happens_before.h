// Telling ThreadSanitizer about the one ordering it cannot see: a plugin runs a blocking host
// function on its own thread and then fires the execution's completion event, through its own
// (uninstrumented) synchronization. The handler releases on the execution's state when the host
// function returns; await() acquires it after the event. No code outside TSan builds.
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
