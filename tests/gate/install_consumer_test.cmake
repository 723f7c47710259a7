# Installs this build to a temporary prefix, then configures, builds and runs
# examples/consumer against it (find_package(softmax_audit) +
# SA_AUDIT_KERNEL_TESTS). Run by CTest as gate_install_consumer (label long):
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
