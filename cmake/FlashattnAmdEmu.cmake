# FlashattnAmdEmu.cmake - the emulated AMD device of issue 15 (test-only, never
# installed): the emulator core of src/emu (fibers, collectives, LDS arena, the ISA
# semantics) as one library, and per emulated target (gfx942 wave64 MFMA, gfx1100 and
# gfx1201 wave32 WMMA) a Catch2 executable of its instruction and scheduler tests,
# registered as the ctest entries amd_emu_isa_gfx<target>_* (gfx942's also check gfx90a's
# forms of its instructions). Then, per target of FA_EMU_API_TARGETS (gfx90a, gfx942,
# gfx1100, gfx1201), flashattn itself with the emulator as its HIP runtime
# (flashattn_amd_emu_gfx<target>) and its tests through the public API (ctest
# amd_emu_gfx<target>_*). Built with clang (the device headers need ext_vector_type and
# _Float16) at -O1 under ASan and UBSan (docs/research/issue15_emulator.md 3.1): an
# out-of-range LDS access must be caught.

if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 17)
  message(FATAL_ERROR "FA_BUILD_AMD_EMU needs clang++ 17 or newer as the C++ compiler "
                      "(configure a fresh build directory with -DCMAKE_CXX_COMPILER=clang++-19)")
endif()
# The host sources join the emulated library under the same sanitizers, whose runtime
# must be clang's.
if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "FA_BUILD_AMD_EMU needs clang as the C compiler too "
                      "(configure a fresh build directory with -DCMAKE_C_COMPILER=clang-19)")
endif()
find_package(Catch2 2 REQUIRED)
include(Catch)

set(FA_EMU_SAN -fsanitize=address,undefined -fno-sanitize-recover=all)
# Per test, about 40 times the longest one takes on 2 cores: an emulator that hangs (a
# partial barrier waited on rather than reported) fails its test instead of stalling CI.
set(FA_EMU_TEST_TIMEOUT 120)
add_library(fa_amd_emu STATIC ${PROJECT_SOURCE_DIR}/src/emu/fa_emu.cpp ${PROJECT_SOURCE_DIR}/src/emu/fa_emu_isa.cpp)
target_include_directories(fa_amd_emu PUBLIC ${PROJECT_SOURCE_DIR}/src/emu)
# -Wno-psabi: 32-byte vectors pass by value without AVX; every emulated unit is built
# with these same flags, so caller and callee agree.
target_compile_options(fa_amd_emu PUBLIC -O1 -g -fno-omit-frame-pointer ${FA_EMU_SAN} -Wall -Wextra -Wno-psabi)
target_link_options(fa_amd_emu PUBLIC ${FA_EMU_SAN})
set_target_properties(fa_amd_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)

# Catch2's main, compiled once for every test executable below.
add_library(fa_amd_emu_catch_main OBJECT ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
target_link_libraries(fa_amd_emu_catch_main PRIVATE fa_amd_emu Catch2::Catch2)

# src/emu ahead of src/hip: the emulated fa_amd_isa.h, then the layouts' constants.
foreach(target 942 1100 1201)
  set(exe fa_amd_emu_isa_gfx${target})
  add_executable(${exe} ${PROJECT_SOURCE_DIR}/tests/emu/test_emu_isa.cpp
                 ${PROJECT_SOURCE_DIR}/tests/emu/test_emu_sched.cpp $<TARGET_OBJECTS:fa_amd_emu_catch_main>)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/src/emu ${PROJECT_SOURCE_DIR}/src/emu/include
                             ${PROJECT_SOURCE_DIR}/src/hip)
  target_compile_definitions(${exe} PRIVATE FA_EMU_TARGET=${target}
                             FA_EMU_CALC_DIR="${PROJECT_SOURCE_DIR}/tests/emu/calc")
  target_link_libraries(${exe} PRIVATE fa_amd_emu Catch2::Catch2)
  set_target_properties(${exe} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  catch_discover_tests(${exe} TEST_PREFIX amd_emu_isa_gfx${target}_ PROPERTIES TIMEOUT ${FA_EMU_TEST_TIMEOUT})
  # src/hip/fa_device.h over the emulated thin names, as step 3's units will compile it:
  # fa_device.h's quoted "fa_amd_isa.h" finds src/hip's own copy, which the forced
  # include of the emulated one (same include guard) must turn into a no-op.
  add_test(NAME amd_emu_isa_gfx${target}_fa_device_h_compiles
           COMMAND ${CMAKE_CXX_COMPILER} -x c++ -std=c++17 -fsyntax-only -Werror -Wno-psabi
                   -DFA_EMU_TARGET=${target} -include fa_amd_isa.h -I${PROJECT_SOURCE_DIR}/src/emu
                   -I${PROJECT_SOURCE_DIR}/src/emu/include -I${PROJECT_SOURCE_DIR}/src/hip
                   -I${PROJECT_SOURCE_DIR}/src/common ${PROJECT_SOURCE_DIR}/src/hip/fa_device.h)
endforeach()

# ---- flashattn on the emulated device ----

# The kernels each emulated library holds: by default every hip instance of the
# instance lists, so for every head dim and dtype the dispatcher's choice is the real
# part's. A shorter list (names of cmake/FlashattnInstances.cmake, e.g.
# fa_hip_fwd_d64_f16_128x64x1) builds faster, as tests/emu/mutation_check.py does; the
# rows left out stay planned in the registry, so the API refuses them as not compiled.
set(FA_EMU_API_TARGETS 90a 942 1100 1201 CACHE STRING "Emulated AMD targets built as flashattn libraries with API tests")
set(FA_EMU_INSTANCES all CACHE STRING "HIP kernel instances compiled into the emulated libraries: all, or a list of names")
set(FA_EMU_ARCH_90a gfx90a)
set(FA_EMU_ARCH_942 gfx942)
set(FA_EMU_ARCH_1100 gfx1100)
set(FA_EMU_ARCH_1201 gfx1201)
# The instruction set a target's kernels are compiled for (src/emu/fa_amd_isa.h's
# FA_EMU_TARGET). gfx90a's device pass selects gfx942's MFMA forms (src/hip/fa_amd_isa.h),
# whose lane mappings equal gfx942's in the Matrix Instruction Calculator (tests/emu/calc,
# checked by the ISA tests): both link one build of the kernel units, and differ in their
# arch row (110 CUs against 304), so in what the dispatcher plans.
set(FA_EMU_ISA_90a 942)
set(FA_EMU_ISA_942 942)
set(FA_EMU_ISA_1100 1100)
set(FA_EMU_ISA_1201 1201)
# The instruction sets that run wave64 (CDNA); the others are wave32 (RDNA).
set(FA_EMU_WAVE64_ISAS 942)
# The wave size of instruction set ${isa}, into ${out}.
function(fa_emu_wave_size isa out)
  set(wave 32)
  if(isa IN_LIST FA_EMU_WAVE64_ISAS)
    set(wave 64)
  endif()
  set(${out} ${wave} PARENT_SCOPE)
endfunction()

set(FA_EMU_DIR ${PROJECT_BINARY_DIR}/amd_emu)
include(FlashattnInstances)
fa_instance_units(hip ${FA_EMU_DIR}/units cpp)
set(FA_EMU_INSTANCE_NAMES ${FA_EMU_INSTANCES})
if(FA_EMU_INSTANCES STREQUAL "all")
  set(FA_EMU_INSTANCE_NAMES "")
  foreach(file IN LISTS FA_UNIT_SOURCES)
    get_filename_component(name ${file} NAME_WE)
    if(NOT name STREQUAL "fa_hip_shared_kernels")
      list(APPEND FA_EMU_INSTANCE_NAMES ${name})
    endif()
  endforeach()
endif()
foreach(name IN LISTS FA_EMU_INSTANCE_NAMES)
  if(NOT EXISTS ${FA_EMU_DIR}/units/${name}.cpp)
    message(FATAL_ERROR "FA_EMU_INSTANCES: no hip instance ${name} in the instance lists")
  endif()
endforeach()

# The instances one emulated target compiles, into ${out}: a wave32 target only the rows
# listing wave 32 (cmake/kernel_unit.in leaves the others' kernels out, as on the device).
function(fa_emu_target_instances target out)
  set(names "")
  fa_emu_wave_size("${FA_EMU_ISA_${target}}" wave)
  foreach(name IN LISTS FA_EMU_INSTANCE_NAMES)
    # The manifest line of its first kernel: "... DTYPE WAVE32 SOURCE".
    string(REGEX MATCH " ([01]) [^ \n]*/${name}[.]cpp" _ "${FA_UNIT_MANIFEST}")
    if(wave EQUAL 64 OR CMAKE_MATCH_1 EQUAL 1)
      list(APPEND names ${name})
    endif()
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# The registry of one emulated target: the instances it compiles built, the other hip
# rows planned, the CPU rows as always.
function(fa_emu_registry target out)
  set(FA_BUILT_cuda FALSE)
  set(FA_BUILT_hip TRUE)
  fa_emu_target_instances(${target} FA_BUILT_NAMES_hip)
  fa_write_registry(${out})
endfunction()

# What every target's library and tests share, compiled once: flashattn's host side
# with the HIP backend listed (gpu_backend.c's FA_HAVE_HIP), and the tests' oracle and
# problem builder.
add_library(flashattn_amd_emu_host OBJECT ${FA_COMMON_SOURCES})
target_include_directories(flashattn_amd_emu_host PRIVATE ${PROJECT_SOURCE_DIR}/include
                           ${PROJECT_SOURCE_DIR}/src/common)
target_compile_definitions(flashattn_amd_emu_host PRIVATE FA_HAVE_HIP=1)
target_link_libraries(flashattn_amd_emu_host PRIVATE fa_amd_emu)
add_library(fa_amd_emu_test_support OBJECT ${PROJECT_SOURCE_DIR}/tests/oracle.cpp
            ${PROJECT_SOURCE_DIR}/tests/cpu_case.cpp ${PROJECT_SOURCE_DIR}/tests/reference/fa_reference.c)
target_include_directories(fa_amd_emu_test_support PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tests
                           ${PROJECT_SOURCE_DIR}/tests/reference ${PROJECT_SOURCE_DIR}/src/common)
target_link_libraries(fa_amd_emu_test_support PRIVATE fa_amd_emu Catch2::Catch2)
set_target_properties(flashattn_amd_emu_host fa_amd_emu_test_support PROPERTIES CXX_STANDARD 17
                      CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)

foreach(target IN LISTS FA_EMU_API_TARGETS)
  set(arch ${FA_EMU_ARCH_${target}})
  set(lib flashattn_amd_emu_gfx${target})
  fa_emu_registry(${target} ${FA_EMU_DIR}/gfx${target}/registry.c)
  # The HIP kernel units for the host, once per instruction set: src/hip/fa_device.h over
  # the emulated thin names (forced in, as the fa_device_h_compiles test above checks).
  set(isa ${FA_EMU_ISA_${target}})
  set(kernels flashattn_amd_emu_isa${isa}_kernels)
  if(NOT TARGET ${kernels})
    fa_emu_target_instances(${target} names)
    set(units ${FA_EMU_DIR}/units/fa_hip_shared_kernels.cpp)
    foreach(name IN LISTS names)
      list(APPEND units ${FA_EMU_DIR}/units/${name}.cpp)
    endforeach()
    add_library(${kernels} OBJECT ${units})
    target_include_directories(${kernels} PRIVATE ${PROJECT_SOURCE_DIR}/src/emu
                               ${PROJECT_SOURCE_DIR}/src/emu/include ${PROJECT_SOURCE_DIR}/src/hip
                               ${PROJECT_SOURCE_DIR}/src/common ${PROJECT_SOURCE_DIR}/include)
    target_compile_definitions(${kernels} PRIVATE FA_EMU_TARGET=${isa})
    # -Wno-pass-failed: clang's host passes cannot unroll every loop the kernels mark.
    target_compile_options(${kernels} PRIVATE -include fa_amd_isa.h -Wno-pass-failed)
    target_link_libraries(${kernels} PRIVATE fa_amd_emu)
    set_target_properties(${kernels} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  endif()
  # flashattn's host side, the target's registry and the emulator as its runtime table.
  add_library(${lib} STATIC $<TARGET_OBJECTS:flashattn_amd_emu_host> ${FA_EMU_DIR}/gfx${target}/registry.c
              ${PROJECT_SOURCE_DIR}/src/emu/fa_emu_runtime.cpp $<TARGET_OBJECTS:${kernels}>)
  target_include_directories(${lib} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src/common)
  target_compile_definitions(${lib} PRIVATE FA_HAVE_HIP=1 FA_EMU_TARGET=${isa} FA_EMU_ARCH="${arch}")
  target_link_libraries(${lib} PUBLIC fa_amd_emu Threads::Threads m)
  set_target_properties(${lib} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)

  # The API tests, compiled once per wave size (FA_HAVE_HIP: gpu_runtime.h declares
  # fa_hip_runtime, which one test calls directly); a target adds only its part's name.
  fa_emu_wave_size(${isa} wave)
  set(api_tests fa_amd_emu_api_tests_wave${wave})
  if(NOT TARGET ${api_tests})
    add_library(${api_tests} OBJECT ${PROJECT_SOURCE_DIR}/tests/emu/test_emu_api.cpp
                ${PROJECT_SOURCE_DIR}/tests/emu/test_emu_sweep.cpp ${PROJECT_SOURCE_DIR}/tests/emu/emu_api_checks.cpp)
    target_include_directories(${api_tests} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tests
                               ${PROJECT_SOURCE_DIR}/tests/reference ${PROJECT_SOURCE_DIR}/src/common)
    target_compile_definitions(${api_tests} PRIVATE FA_EMU_WAVE_SIZE=${wave} FA_HAVE_HIP=1)
    target_link_libraries(${api_tests} PRIVATE fa_amd_emu Catch2::Catch2)
    set_target_properties(${api_tests} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  endif()
  set(exe ${lib}_tests)
  add_executable(${exe} ${PROJECT_SOURCE_DIR}/tests/emu/emu_arch.cpp $<TARGET_OBJECTS:${api_tests}>
                 $<TARGET_OBJECTS:fa_amd_emu_test_support> $<TARGET_OBJECTS:fa_amd_emu_catch_main>)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/tests/reference
                             ${PROJECT_SOURCE_DIR}/src/common)
  target_compile_definitions(${exe} PRIVATE FA_EMU_ARCH="${arch}")
  target_link_libraries(${exe} PRIVATE ${lib} Catch2::Catch2)
  set_target_properties(${exe} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  catch_discover_tests(${exe} TEST_PREFIX amd_emu_gfx${target}_ PROPERTIES TIMEOUT ${FA_EMU_TEST_TIMEOUT})
endforeach()
