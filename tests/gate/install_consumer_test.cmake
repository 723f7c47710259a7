# Installs this build to a temporary prefix, then configures, builds and runs
# examples/consumer against it (find_package(softmax_audit) +
# SA_AUDIT_KERNEL_TESTS). Also fails when the installed package mentions CUDA
# (a CPU-only consumer must not need it, even when the package was built where
# nvcc exists), installs a header outside include/softmax_audit/, or lacks the
# license. Run by CTest as gate_install_consumer (label packaging, default run):
#   cmake -DBUILD=<build dir> -DSRC=<source dir> -DWORK=<scratch dir> -P install_consumer_test.cmake
foreach(v BUILD SRC WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_consumer_test.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
step("install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
file(GLOB_RECURSE installed RELATIVE ${WORK}/prefix ${WORK}/prefix/*)
foreach(f ${installed})
  if(f MATCHES "\\.(h|hpp|cuh)$" AND NOT f MATCHES "^include/softmax_audit/")
    message(FATAL_ERROR "installed header outside include/softmax_audit/: ${f}")
  endif()
  if(f MATCHES "\\.cmake$")
    file(STRINGS ${WORK}/prefix/${f} cuda REGEX "CUDA")
    if(cuda)
      message(FATAL_ERROR "the installed ${f} needs CUDA: ${cuda}")
    endif()
  endif()
endforeach()
if(NOT EXISTS ${WORK}/prefix/share/doc/softmax-audit/LICENSE)
  message(FATAL_ERROR "the license is not installed (share/doc/softmax-audit/LICENSE)")
endif()
# The man page and shell completions, generated from the CLI's tables (cli/completion.cpp).
foreach(f share/man/man1/softmax-audit.1 share/bash-completion/completions/softmax-audit
          share/zsh/vendor-completions/_softmax-audit)
  if(NOT EXISTS ${WORK}/prefix/${f})
    message(FATAL_ERROR "not installed: ${f} (the man page and completions of cli/CMakeLists.txt)")
  endif()
endforeach()
message(STATUS "installed files: headers under include/softmax_audit/ only, no CUDA, license, "
               "man page and completions: ok")
step("configure consumer" ${CMAKE_COMMAND} -S ${SRC}/examples/consumer -B ${WORK}/build -G Ninja
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK}/prefix)
step("build consumer" ${CMAKE_COMMAND} --build ${WORK}/build -j2)
step("run consumer tests" ${WORK}/build/my_kernel_audit)
if(NOT last_output MATCHES "PASSED")
  message(FATAL_ERROR "the consumer's tests did not report PASSED:\n${last_output}")
endif()
# The outside kernel example builds on its own too, against the installed header only.
step("configure outside kernel" ${CMAKE_COMMAND} -S ${SRC}/examples/outside_kernel -B ${WORK}/kernel
     -DSOFTMAX_AUDIT_INCLUDE_DIR=${WORK}/prefix/include)
step("build outside kernel" ${CMAKE_COMMAND} --build ${WORK}/kernel)
