# CPU attention forward (kernels/cpu/attention.{hpp,cpp}) and its benchmark.
# Included from kernels/cpu/CMakeLists.txt:
#     include(${CMAKE_CURRENT_LIST_DIR}/attention.cmake)
# Defines sa_cpu_attention (static library: sa::kernels::cpu_attention,
# merge_attention_partials); bench/CMakeLists.txt builds attention_bench.
# isa_limit.cpp (SA_CPU_MAX_ISA) lives here, the lowest CPU library, so that
# every binary using the CPU kernels' vector code has it.
add_library(sa_cpu_attention STATIC ${CMAKE_CURRENT_LIST_DIR}/attention.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/attention_decode.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/isa_limit.cpp)
target_link_libraries(sa_cpu_attention PUBLIC sa_core PRIVATE PkgConfig::HWY)
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  # Parallel over query blocks / key parts; OMP_NUM_THREADS controls it.
  target_link_libraries(sa_cpu_attention PUBLIC OpenMP::OpenMP_CXX)
endif()
