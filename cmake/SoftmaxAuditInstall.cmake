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

# Headers: the C ABI at include/softmax_audit/kernel.h, the C++ suite under
# include/softmax_audit/suite/<dir>/ (sa_core's install include root).
install(FILES ${PROJECT_SOURCE_DIR}/include/softmax_audit/kernel.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/softmax_audit)
foreach(dir core theory kernels properties reference gate)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${dir})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/softmax_audit/suite
            FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "testing" EXCLUDE)
  endif()
endforeach()

set(sa_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/softmax_audit)
install(EXPORT softmax_auditTargets NAMESPACE softmax_audit:: DESTINATION ${sa_config_dir})
set(SA_CONFIG_HAVE_CUDA ${SA_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/softmax_auditConfig.cmake.in
  ${PROJECT_BINARY_DIR}/softmax_auditConfig.cmake INSTALL_DESTINATION ${sa_config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/softmax_auditConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/softmax_auditConfig.cmake
              ${PROJECT_BINARY_DIR}/softmax_auditConfigVersion.cmake
        DESTINATION ${sa_config_dir})
