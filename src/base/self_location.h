// Where the running code lives, for finding what is installed beside it (the isolation helper, a
// device bridge): the executable's folder, and the folder of the shared object plugboard's code is in
// (libplugboard.so when an application links the library; the executable itself for the CLI).
#pragma once

#include <filesystem>

namespace plugboard {

// Empty when the system cannot tell (for code in the main program, which the loader names by
// argv[0], unless that is an absolute path: running_executable_folder() covers it).
std::filesystem::path running_executable_folder();
std::filesystem::path plugboard_code_folder();

}  // namespace plugboard
