# The fetch layer's tests (included from tests/CMakeLists.txt). libzip builds the fake wheels.
plugboard_test(fetch_test fetch_test.cpp)
target_link_libraries(fetch_test PRIVATE pb_fetch PkgConfig::LIBZIP)
