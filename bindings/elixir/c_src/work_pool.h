// Threads of the NIF's own for work that must not run on a BEAM scheduler: compiling (with the
// declaration of its host callbacks) and starting executions of programs with host callbacks (their
// PJRT_LoadedExecutable_Execute may wait: see nif_execute.cpp). A thread is added whenever every
// thread is busy, up to a limit; threads live as long as the VM (the NIF is never unloaded).
#pragma once

#include <functional>

namespace plugboard::nif {

// Runs `task` on a pool thread. False when it could not be queued (no memory, no thread).
bool run_off_scheduler(std::function<void()> task) noexcept;

}  // namespace plugboard::nif
