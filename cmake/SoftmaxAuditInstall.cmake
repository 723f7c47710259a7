# Install rules and exported targets, so that an installed softmax-audit is
# used with
#     find_package(softmax_audit REQUIRED)
#     target_link_libraries(my_tests PRIVATE softmax_audit::suite)
# (see examples/consumer). Included from gate/CMakeLists.txt, i.e. after every
# library target of the project exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Every in-project target `sa_suite` needs, following link libraries (and
# stripping $<LINK_ONLY:...>), so the export set is closed whatever links what.
function(sa_link_closure out)
  set(todo ${ARGN})
  set(seen)
  while(todo)
    list(POP_FRONT todo t)
    if(t MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(t ${CMAKE_MATCH_1})
    endif()
    if(NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    get_target_property(imported ${t} IMPORTED)
    get_target_property(aliased ${t} ALIASED_TARGET)
    if(aliased)
      list(APPEND todo ${aliased})
      continue()
    endif()
    if(imported)
      continue()
    endif()
    list(APPEND seen ${t})
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(libs ${t} ${prop})
      if(libs)
        list(APPEND todo ${libs})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# softmax_audit::suite: the property suite, the gate and the GoogleTest glue (gate/gtest.hpp).
add_library(sa_suite INTERFACE)
add_library(softmax_audit::suite ALIAS sa_suite)
target_link_libraries(sa_suite INTERFACE sa_gate)
set_target_properties(sa_suite PROPERTIES EXPORT_NAME suite)

# softmax_audit::kernel_abi: the C header alone, for kernels built outside.
add_library(sa_kernel_abi INTERFACE)
add_library(softmax_audit::kernel_abi ALIAS sa_kernel_abi)
target_include_directories(sa_kernel_abi INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(sa_kernel_abi PROPERTIES EXPORT_NAME kernel_abi)

sa_link_closure(sa_export_targets sa_suite sa_kernel_abi)
foreach(t ${sa_export_targets})
  get_target_property(name ${t} EXPORT_NAME)
  if(NOT name AND t MATCHES "^sa_(.*)$")
    set_target_properties(${t} PROPERTIES EXPORT_NAME ${CMAKE_MATCH_1})
  endif()
endforeach()
message(STATUS "softmax-audit: exported targets: ${sa_export_targets}")

install(TARGETS ${sa_export_targets} EXPORT softmax_auditTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# (the softmax-audit executable is installed by cli/CMakeLists.txt)

# Headers, all under the one root include/softmax_audit/: the C ABIs
# (kernel.h, variant.h) and, under suite/<dir>/, only the public C++ headers:
# gate/gtest.hpp (SA_AUDIT_KERNEL_TESTS) and what it includes, nothing else.
# The consumer test (tests/packaging) compiles against exactly this set.
install(FILES ${PROJECT_SOURCE_DIR}/include/softmax_audit/kernel.h
              ${PROJECT_SOURCE_DIR}/include/softmax_audit/variant.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/softmax_audit)
set(sa_public_headers core/attention_case.hpp core/dtype.hpp core/verdict.hpp kernels/kernel.hpp properties/suite.hpp
                      properties/conventions.hpp
                      gate/gtest.hpp gate/guard.hpp gate/isolation.hpp gate/kernel_source.hpp)
foreach(h ${sa_public_headers})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/softmax_audit/suite/${dir})
endforeach()

# The license, in the package's documentation folder (Debian: its copyright file).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/softmax-audit)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/softmax-audit
        RENAME copyright)

set(sa_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/softmax_audit)
install(EXPORT softmax_auditTargets NAMESPACE softmax_audit:: DESTINATION ${sa_config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/softmax_auditConfig.cmake.in
  ${PROJECT_BINARY_DIR}/softmax_auditConfig.cmake INSTALL_DESTINATION ${sa_config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/softmax_auditConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/softmax_auditConfig.cmake
              ${PROJECT_BINARY_DIR}/softmax_auditConfigVersion.cmake
        DESTINATION ${sa_config_dir})

# `cpack -G DEB` (from the build folder): softmax-audit_<version>_<arch>.deb with
# the CLI, the libraries, the public headers and the CMake package, installed
# under /usr; `apt install ./softmax-audit_*.deb` pulls the run-time libraries
# (found by dpkg-shlibdeps) and recommends what a consumer's build needs.
set(CPACK_PACKAGE_NAME softmax-audit)
set(CPACK_PACKAGE_VENDOR "softmax-audit")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "softmax-audit maintainers <softmax-audit@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "gnuplot-nox, cmake, pkg-config, libboost-dev, libmpfr-dev, libgmp-dev, libeigen3-dev, nlohmann-json3-dev, libtomlplusplus-dev, librapidcheck-dev, libgtest-dev")
include(CPack)
