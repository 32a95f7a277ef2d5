# `cmake --install BUILD --prefix P`: the CLI and its isolation helper (bin/), libplugboard.so and the
# CUDA callback bridge where it was built (lib/), the facade headers (include/plugboard/), a CMake
# package (lib/cmake/plugboard: find_package(plugboard CONFIG), target plugboard::plugboard) and a
# pkg-config file (lib/pkgconfig/plugboard.pc). The installed programs find their helper and bridge
# relative to themselves (src/base/self_location.h), so the tree may be moved after installing.
include(CMakePackageConfigHelpers)

install(TARGETS plugboard plugboard-isolate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS plugboard_embed EXPORT plugboardTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/plugboard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET plugboard_cuda_bridge)
  install(TARGETS plugboard_cuda_bridge LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

set(PLUGBOARD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/plugboard)
install(EXPORT plugboardTargets NAMESPACE plugboard:: DESTINATION ${PLUGBOARD_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/plugboardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/plugboardConfig.cmake INSTALL_DESTINATION ${PLUGBOARD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/plugboardConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/plugboardConfig.cmake ${PROJECT_BINARY_DIR}/plugboardConfigVersion.cmake
  DESTINATION ${PLUGBOARD_CMAKE_DIR})

# From lib/pkgconfig (or lib/x86_64-linux-gnu/pkgconfig) back to the prefix.
file(RELATIVE_PATH PLUGBOARD_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/plugboard.pc.in ${PROJECT_BINARY_DIR}/plugboard.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/plugboard.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
