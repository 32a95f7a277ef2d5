# The fetch layer's tests (included from tests/CMakeLists.txt). libzip builds the fake wheels.
plugboard_test(fetch_test fetch_test.cpp)
target_link_libraries(fetch_test PRIVATE pb_fetch PkgConfig::LIBZIP)
# The CLI on hostile command lines: usage errors, all-or-nothing bundles, FIFOs, concurrent runs.
add_test(NAME cli.bundle_hostile COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_bundle_hostile_test.sh $<TARGET_FILE:plugboard>
         $<TARGET_FILE:fault_well_formed> $<TARGET_FILE:fault_init_error> ${CMAKE_CURRENT_BINARY_DIR}/cli_bundle_hostile_work)
