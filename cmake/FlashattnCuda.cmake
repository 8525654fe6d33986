# FlashattnCuda.cmake - adds the CUDA backend to the flashattn target: the kernels of the
# cuda rows of src/common/select/*_instances.txt (one generated translation unit each, so
# they compile in parallel), the runtime table, and named SASS targets from
# FA_CUDA_ARCHS (plus PTX of the newest for later GPUs).
# Named targets everywhere, set before enable_language so CMake never probes a default.
set(FA_CUDA_ARCH_LIST "")
foreach(arch IN LISTS FA_CUDA_ARCHS)
  list(APPEND FA_CUDA_ARCH_LIST ${arch}-real)
endforeach()
list(GET FA_CUDA_ARCHS -1 FA_NEWEST_ARCH)
# The highest named target, for the runtime table (programmatic dependent launch needs
# kernel code built for sm_90+; src/cuda/fa_runtime.h).
set(FA_CUDA_MAX_ARCH 0)
foreach(arch IN LISTS FA_CUDA_ARCHS)
  string(REGEX REPLACE "[^0-9]" "" arch_number "${arch}")
  if(arch_number GREATER FA_CUDA_MAX_ARCH)
    set(FA_CUDA_MAX_ARCH ${arch_number})
  endif()
endforeach()
list(APPEND FA_CUDA_ARCH_LIST ${FA_NEWEST_ARCH}-virtual)
set(CMAKE_CUDA_ARCHITECTURES "${FA_CUDA_ARCH_LIST}")
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# The kernels: one translation unit per row of the instance lists and dtype, plus the
# shared kernels (cmake/FlashattnInstances.cmake); the runtime table, written once in
# src/common/gpu_host over src/cuda/fa_runtime.h, compiled as CUDA.
include(FlashattnInstances)
fa_instance_units(cuda ${PROJECT_BINARY_DIR}/generated/cuda cu)
set(FA_CUDA_RUNTIME_TABLE ${PROJECT_SOURCE_DIR}/src/common/gpu_host/runtime_table.cpp)
set_source_files_properties(${FA_CUDA_RUNTIME_TABLE} PROPERTIES LANGUAGE CUDA
  COMPILE_DEFINITIONS FA_CUDA_NEWEST_ARCH=${FA_CUDA_MAX_ARCH})
set(FA_CUDA_SOURCES ${FA_CUDA_RUNTIME_TABLE} ${FA_UNIT_SOURCES})
target_sources(flashattn_objects PRIVATE ${FA_CUDA_SOURCES})
target_include_directories(flashattn_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cuda)
target_compile_definitions(flashattn_objects PRIVATE FA_HAVE_CUDA=1)
set_target_properties(flashattn_objects flashattn PROPERTIES CUDA_ARCHITECTURES "${FA_CUDA_ARCH_LIST}")
option(FA_CUDA_VERBOSE_PTXAS "Print registers/spills per kernel (-Xptxas -v)" OFF)
target_compile_options(flashattn_objects PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo
  $<$<BOOL:${FA_CUDA_VERBOSE_PTXAS}>:-Xptxas=-v>>)
# The warpgroup forward (ws_instances.txt): wgmma and setmaxnreg exist only in sm_90a
# code, which runs on sm_90 devices alone, so its units are an object library of their
# own built for that one target (no PTX: "a" features are not forward compatible), and
# only when 90 is a target of this build. Their objects join the library's
# (FA_WS_OBJECTS, CMakeLists.txt); the registry marks the rows compiled from
# FA_CUDA_WARPGROUP.
set(FA_CUDA_WARPGROUP OFF)
if("90" IN_LIST FA_CUDA_ARCHS AND FA_UNIT_SOURCES_ws)
  set(FA_CUDA_WARPGROUP ON)
  add_library(flashattn_ws_objects OBJECT ${FA_UNIT_SOURCES_ws})
  set_target_properties(flashattn_ws_objects PROPERTIES CUDA_ARCHITECTURES OFF CUDA_VISIBILITY_PRESET hidden
                        POSITION_INDEPENDENT_CODE ON)
  target_include_directories(flashattn_ws_objects PRIVATE ${PROJECT_SOURCE_DIR}/include
                             ${PROJECT_SOURCE_DIR}/src/common ${PROJECT_SOURCE_DIR}/src/cuda)
  target_compile_definitions(flashattn_ws_objects PRIVATE FA_HAVE_CUDA=1)
  target_compile_options(flashattn_ws_objects PRIVATE -gencode=arch=compute_90a,code=sm_90a -O3 -lineinfo
    $<$<BOOL:${FA_CUDA_VERBOSE_PTXAS}>:-Xptxas=-v>)
  set(FA_WS_OBJECTS $<TARGET_OBJECTS:flashattn_ws_objects>)
endif()
list(APPEND FA_LINK_DEPS CUDA::cudart_static)
message(STATUS "flashattn: CUDA backend for ${FA_CUDA_ARCH_LIST}; warpgroup forward (sm_90a): ${FA_CUDA_WARPGROUP}")
