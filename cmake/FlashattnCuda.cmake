# FlashattnCuda.cmake - adds the CUDA backend to the flashattn target: one generated
# translation unit per forward/backward instance of src/common/{fwd,bwd}_instances.h (so instances
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
set(FA_CUDA_SOURCES ${PROJECT_SOURCE_DIR}/src/cuda/cuda_backend.cu
                    ${PROJECT_SOURCE_DIR}/src/cuda/cuda_combine.cu
                    ${PROJECT_SOURCE_DIR}/src/cuda/cuda_bwd_prep.cu)

# fa_cuda_instances(LIST_HEADER LETTER PASS KERNEL_HEADER): one generated translation unit
# per entry LETTER(d, m, n, warps, stages) of LIST_HEADER and per dtype, instantiating
# KERNEL_HEADER as fa_PASS_d<d>_<dtype>_<m>x<n>x<stages>.
include(FlashattnInstances)
function(fa_cuda_instances list_header letter pass kernel_header)
  fa_instance_entries(${list_header} ${letter} entries)
  set(sources "")
  set(FA_KERNEL_HEADER ${kernel_header})
  foreach(entry IN LISTS entries)
    fa_instance_fields("${entry}")
    foreach(FA_DT f16 bf16)
      fa_instance_dtype(${pass} ${FA_DT})
      configure_file(${PROJECT_SOURCE_DIR}/cmake/instance.cu.in ${FA_GEN_DIR}/${FA_NAME}.cu @ONLY)
      list(APPEND sources ${FA_GEN_DIR}/${FA_NAME}.cu)
    endforeach()
  endforeach()
  set(FA_CUDA_SOURCES ${FA_CUDA_SOURCES} ${sources} PARENT_SCOPE)
endfunction()
fa_cuda_instances(fwd_instances.h X fwd gpu_kernels/attn_fwd.h)
fa_cuda_instances(bwd_instances.h B bwd gpu_kernels/attn_bwd.h)

target_sources(flashattn_objects PRIVATE ${FA_CUDA_SOURCES})
target_include_directories(flashattn_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cuda)
target_compile_definitions(flashattn_objects PRIVATE FA_HAVE_CUDA=1)
set_target_properties(flashattn_objects flashattn PROPERTIES CUDA_ARCHITECTURES "${FA_CUDA_ARCH_LIST}")
option(FA_CUDA_VERBOSE_PTXAS "Print registers/spills per kernel (-Xptxas -v)" OFF)
target_compile_options(flashattn_objects PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo
  $<$<BOOL:${FA_CUDA_VERBOSE_PTXAS}>:-Xptxas=-v>>)
list(APPEND FA_LINK_DEPS CUDA::cudart_static)
message(STATUS "flashattn: CUDA backend for ${FA_CUDA_ARCH_LIST}")
