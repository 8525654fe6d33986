# FlashattnHip.cmake - adds the HIP backend: the kernels of the hip rows of
# src/common/select/*_instances.txt (one generated translation unit per row and dtype),
# the shared kernels and the runtime table, each compiled for every target of
# FA_HIP_ARCHS by a HIP compiler driven directly (no CMake HIP language, which needs a
# full ROCm install). The compiler is FA_HIP_COMPILER, else a ROCm 6+ amdclang++, else
# clang++-19 or newer with the ROCm headers and device libraries of the system (Debian 12:
# hipcc, libamdhip64-dev, rocm-device-libs). Writes ${PROJECT_BINARY_DIR}/hip/manifest.txt
# (targets, kernels and their objects) for the resource checks and bench/amd_resources.py.

set(FA_HIP_COMPILER "" CACHE FILEPATH "HIP compiler: amdclang++ (ROCm 6+) or clang++ 19+; empty: search")
set(FA_ROCM_PATH "" CACHE PATH "ROCm root (headers, libamdhip64, device libraries); empty: search")
if(NOT FA_HIP_COMPILER)
  find_program(FA_HIP_AMDCLANG amdclang++ HINTS $ENV{ROCM_PATH}/llvm/bin /opt/rocm/llvm/bin)
  find_program(FA_HIP_CLANG NAMES clang++-21 clang++-20 clang++-19)
  if(FA_HIP_AMDCLANG)
    set(FA_HIP_COMPILER ${FA_HIP_AMDCLANG})
  elseif(FA_HIP_CLANG)
    set(FA_HIP_COMPILER ${FA_HIP_CLANG})
  else()
    message(FATAL_ERROR "FA_ENABLE_HIP: no amdclang++ (ROCm 6+) or clang++-19+ found; set FA_HIP_COMPILER")
  endif()
endif()
if(NOT FA_ROCM_PATH)
  # amdclang++ lives in <rocm>/llvm/bin; Debian's packages install ROCm under /usr.
  get_filename_component(_bin ${FA_HIP_COMPILER} DIRECTORY)
  get_filename_component(_root ${_bin}/../.. ABSOLUTE)
  if(EXISTS ${_root}/include/hip/hip_runtime.h)
    set(FA_ROCM_PATH ${_root})
  elseif(DEFINED ENV{ROCM_PATH})
    set(FA_ROCM_PATH $ENV{ROCM_PATH})
  else()
    set(FA_ROCM_PATH /usr)
  endif()
endif()
find_library(FA_AMDHIP64 amdhip64 HINTS ${FA_ROCM_PATH}/lib REQUIRED)
find_path(FA_HIP_BITCODE ocml.bc PATHS ${FA_ROCM_PATH}/amdgcn/bitcode
          ${FA_ROCM_PATH}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode
          ${FA_ROCM_PATH}/lib/x86_64-linux-gnu/amdgcn/bitcode NO_DEFAULT_PATH REQUIRED)

# __oclc_ISA_version of a target: major * 1000 + minor * 100 + stepping, the last two
# name characters being hex digits (gfx90a -> 9010, gfx942 -> 9402, gfx1201 -> 12001).
function(fa_isa_version arch out)
  string(REGEX MATCH "^gfx([0-9]+)([0-9a-f])([0-9a-f])$" _ ${arch})
  math(EXPR v "${CMAKE_MATCH_1} * 1000 + 0x${CMAKE_MATCH_2} * 100 + 0x${CMAKE_MATCH_3}" OUTPUT_FORMAT DECIMAL)
  set(${out} ${v} PARENT_SCOPE)
endfunction()

# ROCm 6+ ships an oclc_isa_version_<target>.bc per target. Debian's ROCm 5.2.3 has none
# for gfx942, gfx1100 or gfx1201: then build a device-library folder of links to the real
# files plus the missing ones, each the 940 file with its one constant changed. A
# build-environment workaround for compiling here, not for production (docs/amd.md#toolchain-debian-12-rocm-52).
set(FA_HIP_DEVICE_LIBS ${FA_HIP_BITCODE})
set(FA_MISSING_ISA "")
foreach(arch IN LISTS FA_HIP_ARCHS)
  string(REGEX REPLACE "^gfx" "" _id ${arch})
  if(NOT EXISTS ${FA_HIP_BITCODE}/oclc_isa_version_${_id}.bc)
    list(APPEND FA_MISSING_ISA ${arch})
  endif()
endforeach()
if(FA_MISSING_ISA)
  get_filename_component(_llvm_bin ${FA_HIP_COMPILER} DIRECTORY)
  string(REGEX MATCH "-[0-9]+$" _suffix ${FA_HIP_COMPILER})
  find_program(FA_LLVM_DIS NAMES llvm-dis${_suffix} llvm-dis HINTS ${_llvm_bin} REQUIRED)
  find_program(FA_LLVM_AS NAMES llvm-as${_suffix} llvm-as HINTS ${_llvm_bin} REQUIRED)
  set(FA_HIP_DEVICE_LIBS ${PROJECT_BINARY_DIR}/hip/device-libs)
  file(MAKE_DIRECTORY ${FA_HIP_DEVICE_LIBS})
  file(GLOB _bitcode ${FA_HIP_BITCODE}/*.bc)
  foreach(bc IN LISTS _bitcode)
    get_filename_component(_name ${bc} NAME)
    file(CREATE_LINK ${bc} ${FA_HIP_DEVICE_LIBS}/${_name} SYMBOLIC)
  endforeach()
  execute_process(COMMAND ${FA_LLVM_DIS} ${FA_HIP_BITCODE}/oclc_isa_version_940.bc -o -
                  OUTPUT_VARIABLE _isa_ir COMMAND_ERROR_IS_FATAL ANY)
  foreach(arch IN LISTS FA_MISSING_ISA)
    string(REGEX REPLACE "^gfx" "" _id ${arch})
    fa_isa_version(${arch} _version)
    string(REPLACE "i32 9400" "i32 ${_version}" _ir "${_isa_ir}")
    file(WRITE ${PROJECT_BINARY_DIR}/hip/isa_${_id}.ll "${_ir}")
    file(REMOVE ${FA_HIP_DEVICE_LIBS}/oclc_isa_version_${_id}.bc)
    execute_process(COMMAND ${FA_LLVM_AS} ${PROJECT_BINARY_DIR}/hip/isa_${_id}.ll
                    -o ${FA_HIP_DEVICE_LIBS}/oclc_isa_version_${_id}.bc COMMAND_ERROR_IS_FATAL ANY)
  endforeach()
  message(WARNING "flashattn: generated device-library ISA files for ${FA_MISSING_ISA} "
                  "(missing from ${FA_HIP_BITCODE}): fine for compiling, use ROCm 6+ to deploy")
endif()

string(REPLACE ";" "," FA_HIP_ARCH_CSV "${FA_HIP_ARCHS}")
set(FA_HIP_FLAGS -x hip -std=c++17 -O3 -fPIC -fvisibility=hidden --rocm-path=${FA_ROCM_PATH}
    --rocm-device-lib-path=${FA_HIP_DEVICE_LIBS} -DFA_HAVE_HIP=1 "-DFA_HIP_ARCH_LIST=\"${FA_HIP_ARCH_CSV}\""
    -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src/common -I${PROJECT_SOURCE_DIR}/src/hip)
foreach(arch IN LISTS FA_HIP_ARCHS)
  list(APPEND FA_HIP_FLAGS --offload-arch=${arch})
endforeach()
file(GLOB FA_HIP_HEADERS ${PROJECT_SOURCE_DIR}/src/common/*/*.h ${PROJECT_SOURCE_DIR}/src/hip/*.h
     ${PROJECT_SOURCE_DIR}/include/*.h)

# fa_hip_compile(SOURCE OBJECT [FLAGS...]): one HIP translation unit into OBJECT, appended
# to FA_HIP_OBJECTS.
function(fa_hip_compile source object)
  add_custom_command(OUTPUT ${object}
    COMMAND ${FA_HIP_COMPILER} ${FA_HIP_FLAGS} ${ARGN} -c ${source} -o ${object}
    DEPENDS ${source} ${FA_HIP_HEADERS} COMMENT "HIP ${object}" VERBATIM)
  set(FA_HIP_OBJECTS ${FA_HIP_OBJECTS} ${object} PARENT_SCOPE)
endfunction()

set(FA_HIP_DIR ${PROJECT_BINARY_DIR}/hip)
set(FA_HIP_OBJECTS "")
# The kernels: one translation unit per row of the instance lists and dtype, plus the
# shared kernels (cmake/FlashattnInstances.cmake), each compiled for every target. The
# manifest (bench/amd_resources.py) names each kernel symbol with its row and object:
#   kernel SYMBOL PASS HEAD_DIM TILE_M TILE_N WARPS STAGES DTYPE WAVE32 OBJECT
include(FlashattnInstances)
fa_instance_units(hip ${FA_HIP_DIR} hip)
foreach(source IN LISTS FA_UNIT_SOURCES)
  string(REGEX REPLACE "\\.hip$" ".o" object ${source})
  fa_hip_compile(${source} ${object})
endforeach()
string(REPLACE ".hip\n" ".o\n" FA_HIP_KERNELS "${FA_UNIT_MANIFEST}")
# The runtime table (src/common/gpu_host over src/hip/fa_runtime.h) is host code only: a
# device pass would try to emit it for the GPU.
fa_hip_compile(${PROJECT_SOURCE_DIR}/src/common/gpu_host/runtime_table.cpp ${FA_HIP_DIR}/runtime_table.o
               --offload-host-only)
file(WRITE ${FA_HIP_DIR}/manifest.txt "archs ${FA_HIP_ARCHS}\n${FA_HIP_KERNELS}")

# The objects join both libraries (an OBJECT library cannot hold prebuilt objects).
target_sources(flashattn PRIVATE ${FA_HIP_OBJECTS})
list(APPEND FA_EXTRA_OBJECTS ${FA_HIP_OBJECTS})
target_compile_definitions(flashattn_objects PRIVATE FA_HAVE_HIP=1)
list(APPEND FA_LINK_DEPS ${FA_AMDHIP64})
message(STATUS "flashattn: HIP backend for ${FA_HIP_ARCHS} with ${FA_HIP_COMPILER}")
