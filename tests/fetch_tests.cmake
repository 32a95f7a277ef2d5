# The fetch layer's tests (included from tests/CMakeLists.txt). Python's zipfile writes the fake wheels
# (zip_writer.h, fixtures/make_zip.py).
plugboard_test(fetch_test fetch_test.cpp)
target_link_libraries(fetch_test PRIVATE pb_fetch)
plugboard_test(zip_archive_test zip_archive_test.cpp)
target_link_libraries(zip_archive_test PRIVATE pb_fetch)
# The CLI on hostile command lines: usage errors, all-or-nothing bundles, FIFOs, concurrent runs.
add_test(NAME cli.bundle_hostile COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_bundle_hostile_test.sh $<TARGET_FILE:plugboard>
         $<TARGET_FILE:fault_well_formed> $<TARGET_FILE:fault_init_error> ${CMAKE_CURRENT_BINARY_DIR}/cli_bundle_hostile_work)
