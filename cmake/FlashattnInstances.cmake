# FlashattnInstances.cmake - reading the kernel instance lists of src/common
# (fwd_instances.h, bwd_instances.h) for the vendor builds (FlashattnCuda.cmake,
# FlashattnHip.cmake), which generate one translation unit per entry and dtype.
include_guard(GLOBAL)

# fa_instance_entries(LIST_HEADER LETTER OUT): the entries LETTER(d, m, n, warps, stages)
# of LIST_HEADER, in order; re-configures when the list changes (the generated sources
# follow it). The header is read as one string: its list lines end in backslashes, which
# file(STRINGS) would take as escapes.
function(fa_instance_entries list_header letter out)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/common/select/${list_header})
  file(READ ${PROJECT_SOURCE_DIR}/src/common/select/${list_header} text)
  string(REGEX MATCHALL "${letter}\\([0-9]+, [0-9]+, [0-9]+, [0-9]+, [0-9]+\\)" entries "${text}")
  set(${out} ${entries} PARENT_SCOPE)
endfunction()

# fa_instance_fields(ENTRY): FA_D, FA_M, FA_N, FA_W (warps or waves) and FA_S (stages) of
# one entry, set in the caller's scope.
macro(fa_instance_fields entry)
  string(REGEX MATCH "\\(([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+)\\)" _ "${entry}")
  set(FA_D ${CMAKE_MATCH_1})
  set(FA_M ${CMAKE_MATCH_2})
  set(FA_N ${CMAKE_MATCH_3})
  set(FA_W ${CMAKE_MATCH_4})
  set(FA_S ${CMAKE_MATCH_5})
endmacro()

# fa_instance_dtype(PASS DTYPE): FA_NAME (fa_PASS_d<d>_<dtype>_<m>x<n>x<stages>) and
# FA_BF16_DEFINE (the instance templates' dtype line) for DTYPE f16 or bf16, set in the
# caller's scope after fa_instance_fields.
macro(fa_instance_dtype pass dtype)
  set(FA_NAME fa_${pass}_d${FA_D}_${dtype}_${FA_M}x${FA_N}x${FA_S})
  if("${dtype}" STREQUAL "bf16")
    set(FA_BF16_DEFINE "#define FA_INST_BF16 1")
  else()
    set(FA_BF16_DEFINE "")
  endif()
endmacro()
