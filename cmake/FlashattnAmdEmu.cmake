# FlashattnAmdEmu.cmake - the emulated AMD device of issue 15 (test-only, never
# installed): the emulator core of src/emu (fibers, collectives, LDS arena, the ISA
# semantics) as one library, and per emulated target (gfx942 wave64 MFMA, gfx1100 and
# gfx1201 wave32 WMMA) a Catch2 executable of its instruction and scheduler tests,
# registered as the ctest entries amd_emu_isa_gfx<target>_*. Built with clang (the
# device headers need ext_vector_type and _Float16) at -O1 under ASan and UBSan
# (docs/research/issue15_emulator.md 3.1): an out-of-range LDS access must be caught.

if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 17)
  message(FATAL_ERROR "FA_BUILD_AMD_EMU needs clang++ 17 or newer as the C++ compiler "
                      "(configure a fresh build directory with -DCMAKE_CXX_COMPILER=clang++-19)")
endif()
find_package(Catch2 2 REQUIRED)
include(Catch)

set(FA_EMU_SAN -fsanitize=address,undefined -fno-sanitize-recover=all)
add_library(fa_amd_emu STATIC ${PROJECT_SOURCE_DIR}/src/emu/fa_emu.cpp ${PROJECT_SOURCE_DIR}/src/emu/fa_emu_isa.cpp)
target_include_directories(fa_amd_emu PUBLIC ${PROJECT_SOURCE_DIR}/src/emu)
# -Wno-psabi: 32-byte vectors pass by value without AVX; every emulated unit is built
# with these same flags, so caller and callee agree.
target_compile_options(fa_amd_emu PUBLIC -O1 -g -fno-omit-frame-pointer ${FA_EMU_SAN} -Wall -Wextra -Wno-psabi)
target_link_options(fa_amd_emu PUBLIC ${FA_EMU_SAN})
set_target_properties(fa_amd_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)

# src/emu ahead of src/hip: the emulated fa_amd_isa.h, then the layouts' constants.
foreach(target 942 1100 1201)
  set(exe fa_amd_emu_isa_gfx${target})
  add_executable(${exe} ${PROJECT_SOURCE_DIR}/tests/emu/test_emu_isa.cpp
                 ${PROJECT_SOURCE_DIR}/tests/emu/test_emu_sched.cpp ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/src/emu ${PROJECT_SOURCE_DIR}/src/emu/include
                             ${PROJECT_SOURCE_DIR}/src/hip)
  target_compile_definitions(${exe} PRIVATE FA_EMU_TARGET=${target}
                             FA_EMU_CALC_DIR="${PROJECT_SOURCE_DIR}/tests/emu/calc")
  target_link_libraries(${exe} PRIVATE fa_amd_emu Catch2::Catch2)
  set_target_properties(${exe} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  catch_discover_tests(${exe} TEST_PREFIX amd_emu_isa_gfx${target}_)
  # src/hip/fa_device.h over the emulated thin names, as step 3's units will compile it:
  # fa_device.h's quoted "fa_amd_isa.h" finds src/hip's own copy, which the forced
  # include of the emulated one (same include guard) must turn into a no-op.
  add_test(NAME amd_emu_isa_gfx${target}_fa_device_h_compiles
           COMMAND ${CMAKE_CXX_COMPILER} -x c++ -std=c++17 -fsyntax-only -Werror -Wno-psabi
                   -DFA_EMU_TARGET=${target} -include fa_amd_isa.h -I${PROJECT_SOURCE_DIR}/src/emu
                   -I${PROJECT_SOURCE_DIR}/src/emu/include -I${PROJECT_SOURCE_DIR}/src/hip
                   -I${PROJECT_SOURCE_DIR}/src/common ${PROJECT_SOURCE_DIR}/src/hip/fa_device.h)
endforeach()
