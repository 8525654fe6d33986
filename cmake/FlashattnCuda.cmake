# FlashattnCuda.cmake - adds the CUDA backend to the flashattn target: one generated
# translation unit per forward instance of src/common/fwd_instances.h (so instances
# compile in parallel and the list is written once), the runtime mapping in src/cuda,
# and named SASS targets from FA_CUDA_ARCHS (plus PTX of the newest for later GPUs).
# Named targets everywhere, set before enable_language so CMake never probes a default.
set(FA_CUDA_ARCH_LIST "")
foreach(arch IN LISTS FA_CUDA_ARCHS)
  list(APPEND FA_CUDA_ARCH_LIST ${arch}-real)
endforeach()
list(GET FA_CUDA_ARCHS -1 FA_NEWEST_ARCH)
list(APPEND FA_CUDA_ARCH_LIST ${FA_NEWEST_ARCH}-virtual)
set(CMAKE_CUDA_ARCHITECTURES "${FA_CUDA_ARCH_LIST}")
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

set(FA_GEN_DIR ${PROJECT_BINARY_DIR}/generated/cuda)
# Read as one string: the list's lines end in backslashes, which file(STRINGS) would
# treat as escapes of the list separator.
file(READ ${PROJECT_SOURCE_DIR}/src/common/fwd_instances.h FA_INSTANCE_TEXT)
string(REGEX MATCHALL "X\\([0-9]+, [0-9]+, [0-9]+, [0-9]+, [0-9]+\\)" FA_INSTANCE_LINES
       "${FA_INSTANCE_TEXT}")
set(FA_CUDA_SOURCES ${PROJECT_SOURCE_DIR}/src/cuda/cuda_backend.cu
                    ${PROJECT_SOURCE_DIR}/src/cuda/cuda_combine.cu)
foreach(line IN LISTS FA_INSTANCE_LINES)
  string(REGEX MATCH "X\\(([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+)\\)" _ "${line}")
  set(FA_D ${CMAKE_MATCH_1})
  set(FA_M ${CMAKE_MATCH_2})
  set(FA_N ${CMAKE_MATCH_3})
  set(FA_W ${CMAKE_MATCH_4})
  set(FA_S ${CMAKE_MATCH_5})
  foreach(FA_DT f16 bf16)
    set(FA_NAME fa_fwd_d${FA_D}_${FA_DT}_${FA_M}x${FA_N}x${FA_S})
    if(FA_DT STREQUAL "bf16")
      set(FA_BF16_DEFINE "#define FA_INST_BF16 1")
    else()
      set(FA_BF16_DEFINE "")
    endif()
    configure_file(${PROJECT_SOURCE_DIR}/cmake/fwd_instance.cu.in ${FA_GEN_DIR}/${FA_NAME}.cu @ONLY)
    list(APPEND FA_CUDA_SOURCES ${FA_GEN_DIR}/${FA_NAME}.cu)
  endforeach()
endforeach()

target_sources(flashattn_objects PRIVATE ${FA_CUDA_SOURCES})
target_include_directories(flashattn_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cuda)
target_compile_definitions(flashattn_objects PRIVATE FA_HAVE_CUDA=1)
set_target_properties(flashattn_objects flashattn PROPERTIES CUDA_ARCHITECTURES "${FA_CUDA_ARCH_LIST}")
option(FA_CUDA_VERBOSE_PTXAS "Print registers/spills per kernel (-Xptxas -v)" OFF)
target_compile_options(flashattn_objects PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo
  $<$<BOOL:${FA_CUDA_VERBOSE_PTXAS}>:-Xptxas=-v>>)
list(APPEND FA_LINK_DEPS CUDA::cudart_static)
message(STATUS "flashattn: CUDA backend for ${FA_CUDA_ARCH_LIST}")
