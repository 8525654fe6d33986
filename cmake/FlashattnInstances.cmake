# FlashattnInstances.cmake - the instance lists (src/common/select/fwd_instances.txt,
# dec_instances.txt, bwd_instances.txt, ws_instances.txt, bws_instances.txt and
# qreg_instances.txt) turned
# into the build. For a vendor's backend: one translation unit per row and dtype, and
# one for the vendor's shared kernels (fa_instance_units). For
# every vendor, built or only planned: the registry the dispatcher selects from,
# generated/registry.c (fa_write_registry). Names come from here alone:
# fa_<vendor>_<pass>_d<head_dim>_<dtype>_<tile_m>x<tile_n>x<stages>.
include_guard(GLOBAL)

# tests/check_instance_rows.cmake points FA_INSTANCE_DIR at lists of its own.
if(NOT FA_INSTANCE_DIR)
  set(FA_INSTANCE_DIR ${PROJECT_SOURCE_DIR}/src/common/select)
endif()
set(FA_PASSES fwd dec bwd ws bws qreg)
set(FA_KERNEL_HEADER_fwd gpu_kernels/attn_fwd.h)
set(FA_KERNEL_HEADER_dec gpu_kernels/attn_fwd.h)
set(FA_KERNEL_HEADER_bwd gpu_kernels/attn_bwd.h)
set(FA_KERNEL_HEADER_ws gpu_kernels/attn_fwd_ws.h)
set(FA_KERNEL_HEADER_bws gpu_kernels/attn_bwd_ws.h)
set(FA_KERNEL_HEADER_qreg gpu_kernels/attn_fwd.h)
set(FA_KERNEL_SUFFIXES_fwd "")
set(FA_KERNEL_SUFFIXES_dec "")
set(FA_KERNEL_SUFFIXES_bwd _dkdv _dq)
set(FA_KERNEL_SUFFIXES_ws "")
set(FA_KERNEL_SUFFIXES_bws _dkdv)
set(FA_KERNEL_SUFFIXES_qreg "")
# The decode family is the forward kernel with packed GQA rows (attn_fwd.h): a forward
# pass in the registry, its own list and names.
set(FA_REGISTRY_PASS_fwd FWD)
set(FA_REGISTRY_PASS_dec FWD)
set(FA_REGISTRY_PASS_bwd BWD)
set(FA_PACK_GQA_fwd 0)
set(FA_PACK_GQA_dec 1)
set(FA_PACK_GQA_bwd 0)
set(FA_PACK_GQA_ws 0)
set(FA_PACK_GQA_bws 0)
set(FA_PACK_GQA_qreg 0)
# The warpgroup forward (attn_fwd_ws.h): a forward pass in the registry, its own family,
# its own shared-memory rule, units of its own (FA_UNIT_SOURCES_ws: compiled for sm_90a
# only), NVIDIA rows only.
set(FA_REGISTRY_PASS_ws FWD)
set(FA_WARPGROUP_fwd 0)
set(FA_WARPGROUP_dec 0)
set(FA_WARPGROUP_bwd 0)
set(FA_WARPGROUP_ws 1)
set(FA_WARPGROUP_bws 1)
set(FA_WARPGROUP_qreg 0)
set(FA_SMEM_MACRO_fwd FA_FWD_SMEM_BYTES)
set(FA_SMEM_MACRO_dec FA_FWD_SMEM_BYTES)
set(FA_SMEM_MACRO_bwd FA_BWD_SMEM_BYTES)
set(FA_SMEM_MACRO_ws FA_WS_SMEM_BYTES)
set(FA_SMEM_MACRO_bws FA_BWS_SMEM_BYTES)
set(FA_SMEM_MACRO_qreg FA_QREG_SMEM_BYTES)
# Registers per thread a config records (0: unknown, the compiler's choice).
set(FA_REGS_MACRO_ws FA_WS_REGS_PER_THREAD)
set(FA_VENDORS_ws "^cuda$")
# The warpgroup backward (attn_bwd_ws.h): a backward pass in the registry, one kernel
# (dK/dV, whose bulk reductions always sum dQ, in key-block order per query tile when the
# call is deterministic: ordered_dq), compiled with the warpgroup forward's units
# (sm_90a), NVIDIA only.
set(FA_REGISTRY_PASS_bws BWD)
set(FA_REGS_MACRO_bws FA_WS_REGS_PER_THREAD)
set(FA_VENDORS_bws "^cuda$")
# The Q-in-registers forward (attn_fwd.h with FA_INST_Q_IN_REGS): a forward pass in the
# prefill family, its own shared-memory rule (no Q tile), AMD rows only (src/hip runs it
# on CDNA's 32 x 32 x 8).
set(FA_REGISTRY_PASS_qreg FWD)
set(FA_DEFINES_qreg "#define FA_INST_Q_IN_REGS 1")
set(FA_REGS_MACRO_qreg FA_QREG_REGS_PER_THREAD)
set(FA_VENDORS_qreg "^hip$")
# The enumerators of the registry's fields, per list spelling.
set(FA_BACKEND_cuda FA_BACKEND_CUDA)
set(FA_BACKEND_hip FA_BACKEND_HIP)
set(FA_BACKEND_cpu FA_BACKEND_CPU)
set(FA_VENDOR_cuda FA_VENDOR_NVIDIA)
set(FA_VENDOR_hip FA_VENDOR_AMD)
set(FA_VENDOR_cpu FA_VENDOR_CPU)
set(FA_DTYPE_f32 FA_DTYPE_F32)
set(FA_DTYPE_f16 FA_DTYPE_F16)
set(FA_DTYPE_bf16 FA_DTYPE_BF16)

# fa_row_fields(ROW): FA_VENDOR, FA_D, FA_M, FA_N, FA_W, FA_S, FA_WAVES, FA_DTYPES (lists)
# of one row, in the caller's scope.
macro(fa_row_fields row)
  string(REPLACE ":" ";" _fields "${row}")
  list(GET _fields 0 FA_VENDOR)
  list(GET _fields 1 FA_D)
  list(GET _fields 2 FA_M)
  list(GET _fields 3 FA_N)
  list(GET _fields 4 FA_W)
  list(GET _fields 5 FA_S)
  list(GET _fields 6 FA_WAVES)
  list(GET _fields 7 FA_DTYPES)
  string(REPLACE "," ";" FA_WAVES "${FA_WAVES}")
  string(REPLACE "," ";" FA_DTYPES "${FA_DTYPES}")
endmacro()

# The name of a row's instance for one dtype, in the caller's scope as FA_NAME.
macro(fa_instance_name pass dtype)
  set(FA_NAME fa_${FA_VENDOR}_${pass}_d${FA_D}_${dtype}_${FA_M}x${FA_N}x${FA_S})
endmacro()

# The wave sizes a vendor's rows may list: CUDA's warps are 32 lanes, AMD's waves 64
# (CDNA) or 32 (RDNA), and the CPU's "-" (one thread per warp). The dtypes a vendor's
# kernels are written for: the GPU kernels take 16-bit inputs only.
set(FA_WAVES_cuda "^32$")
set(FA_WAVES_hip "^(64|32|64,32|32,64)$")
set(FA_WAVES_cpu "^-$")
set(FA_DTYPES_cuda "^(f16|bf16)(,(f16|bf16))*$")
set(FA_DTYPES_hip "${FA_DTYPES_cuda}")
set(FA_DTYPES_cpu "^(f32|f16|bf16)(,(f32|f16|bf16))*$")

# fa_instance_rows(PASS OUT): the rows of PASS's list, each as
# "vendor:head_dim:tile_m:tile_n:warps:stages:waves:dtypes". A row that is not 8 columns
# of the documented kinds (positive decimal numbers, a vendor's own wave sizes and
# dtypes), or that names an instance another row or dtype already names, stops the
# configuration with the line: a malformed list never builds silently.
function(fa_instance_rows pass out)
  set(list_file ${FA_INSTANCE_DIR}/${pass}_instances.txt)
  if(NOT EXISTS ${list_file}) # a test's own lists may leave a pass out
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  if(NOT CMAKE_SCRIPT_MODE_FILE) # a configure re-runs when a list changes
    set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${list_file})
  endif()
  file(STRINGS ${list_file} lines ENCODING UTF-8) # the lists' comments hold UTF-8
  set(rows "")
  set(names "")
  foreach(line IN LISTS lines)
    string(STRIP "${line}" line)
    if(line STREQUAL "" OR line MATCHES "^#")
      continue()
    endif()
    string(REGEX REPLACE "[ \t]+" ";" fields "${line}")
    list(LENGTH fields n)
    set(valid FALSE)
    if(n EQUAL 8)
      list(GET fields 0 vendor)
      list(SUBLIST fields 1 5 numbers)
      list(GET fields 6 waves)
      list(GET fields 7 dtypes)
      list(FILTER numbers EXCLUDE REGEX "^[1-9][0-9]*$")
      list(LENGTH numbers bad_numbers)
      if(vendor MATCHES "^(cuda|hip|cpu)$" AND bad_numbers EQUAL 0 AND waves MATCHES "${FA_WAVES_${vendor}}" AND
         dtypes MATCHES "${FA_DTYPES_${vendor}}")
        set(valid TRUE)
      endif()
    endif()
    if(valid AND DEFINED FA_VENDORS_${pass} AND NOT vendor MATCHES "${FA_VENDORS_${pass}}")
      message(FATAL_ERROR "${list_file}: row \"${line}\" is for ${vendor}; this list's kernels "
                          "exist for vendors matching ${FA_VENDORS_${pass}} only")
    endif()
    if(NOT valid)
      message(FATAL_ERROR "${list_file}: malformed row \"${line}\" (want: vendor head_dim tile_m "
                          "tile_n warps stages waves dtypes; numbers positive; waves 32 for cuda, "
                          "64 and/or 32 for hip, - for cpu; dtypes f16/bf16, and f32 on cpu)")
    endif()
    string(JOIN ":" row ${fields})
    fa_row_fields("${row}")
    foreach(dtype IN LISTS FA_DTYPES)
      fa_instance_name(${pass} ${dtype})
      if(FA_NAME IN_LIST names)
        message(FATAL_ERROR "${list_file}: row \"${line}\" names ${FA_NAME} again (an instance "
                            "is its vendor, head dim, dtype, tiles and stages)")
      endif()
      list(APPEND names ${FA_NAME})
    endforeach()
    list(APPEND rows "${row}")
  endforeach()
  set(${out} "${rows}" PARENT_SCOPE)
endfunction()

# The kernel symbols of instance FA_NAME of PASS, in the caller's scope as `symbols`: the
# name itself, or the name plus each of the pass's suffixes (the backward's two kernels).
macro(fa_instance_symbols pass)
  set(symbols ${FA_NAME})
  if(FA_KERNEL_SUFFIXES_${pass})
    list(TRANSFORM FA_KERNEL_SUFFIXES_${pass} PREPEND ${FA_NAME} OUTPUT_VARIABLE symbols)
  endif()
endmacro()

# fa_write_unit(FILE WHAT DEFINES INCLUDES SYMBOLS): a translation unit of the vendor
# FA_UNIT_VENDOR from cmake/kernel_unit.in, with a launch handle per symbol.
function(fa_write_unit file what defines includes symbols)
  get_filename_component(FA_UNIT_NAME ${file} NAME)
  set(FA_UNIT_WHAT "${what}")
  set(FA_VENDOR ${FA_UNIT_VENDOR})
  string(JOIN "\n" FA_UNIT_DEFINES ${defines})
  list(TRANSFORM includes PREPEND "#include \"")
  list(TRANSFORM includes APPEND "\"")
  string(JOIN "\n" FA_UNIT_INCLUDES ${includes})
  list(TRANSFORM symbols PREPEND "FA_KERNEL_HANDLE(")
  list(TRANSFORM symbols APPEND ")")
  string(JOIN "\n" FA_UNIT_HANDLES ${symbols})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/kernel_unit.in ${file} @ONLY)
endfunction()

# fa_instance_units(VENDOR DIR EXT): writes VENDOR's translation units into DIR and sets,
# in the caller's scope, FA_UNIT_SOURCES (the files; the warpgroup pass's apart, in
# FA_UNIT_SOURCES_ws, for their own device flags) and FA_UNIT_MANIFEST (one line per
# kernel symbol: "kernel SYMBOL PASS HEAD_DIM TILE_M TILE_N WARPS STAGES DTYPE WAVE32
# SOURCE", and for the shared kernels "kernel SYMBOL shared 0 0 0 0 0 any 1 SOURCE").
function(fa_instance_units vendor dir ext)
  set(FA_UNIT_VENDOR ${vendor})
  set(sources "")
  set(sources_ws "")
  set(manifest "")
  foreach(pass IN LISTS FA_PASSES)
    fa_instance_rows(${pass} rows)
    foreach(row IN LISTS rows)
      fa_row_fields("${row}")
      if(NOT FA_VENDOR STREQUAL vendor)
        continue()
      endif()
      set(wave32 0)
      if("32" IN_LIST FA_WAVES)
        set(wave32 1)
      endif()
      foreach(dtype IN LISTS FA_DTYPES)
        fa_instance_name(${pass} ${dtype})
        set(bf16 0)
        if(dtype STREQUAL "bf16")
          set(bf16 1)
        endif()
        set(defines "#define FA_INST_D ${FA_D}" "#define FA_INST_M ${FA_M}" "#define FA_INST_N ${FA_N}"
                    "#define FA_INST_WARPS ${FA_W}" "#define FA_INST_STAGES ${FA_S}"
                    "#define FA_INST_NAME ${FA_NAME}" "#define FA_INST_WAVE32 ${wave32}")
        if(FA_PACK_GQA_${pass})
          list(APPEND defines "#define FA_INST_PACK_GQA 1")
        endif()
        if(FA_WARPGROUP_${pass})
          list(APPEND defines "#define FA_INST_WARPGROUP 1")
        endif()
        list(APPEND defines ${FA_DEFINES_${pass}})
        if(bf16)
          list(APPEND defines "#define FA_INST_BF16 1")
        endif()
        fa_instance_symbols(${pass})
        set(file ${dir}/${FA_NAME}.${ext})
        string(REPLACE ":" " " row_text "${row}")
        fa_write_unit(${file} "the row \"${row_text}\" of\n// src/common/select/${pass}_instances.txt, as ${dtype}"
                      "${defines}" "${FA_KERNEL_HEADER_${pass}}" "${symbols}")
        if(FA_WARPGROUP_${pass})
          list(APPEND sources_ws ${file})
        else()
          list(APPEND sources ${file})
        endif()
        foreach(symbol IN LISTS symbols)
          string(APPEND manifest "kernel ${symbol} ${pass} ${FA_D} ${FA_M} ${FA_N} ${FA_W} ${FA_S} "
                 "${dtype} ${wave32} ${file}\n")
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  # The kernels every instance shares: no matrix instructions, so every target builds them.
  set(file ${dir}/fa_${vendor}_shared_kernels.${ext})
  set(symbols fa_${vendor}_combine fa_${vendor}_bwd_preprocess fa_${vendor}_bwd_convert_dq
              fa_${vendor}_kv_append fa_${vendor}_seq_check fa_${vendor}_seq_check_pages)
  fa_write_unit(${file} "the combine (fa_combine, split-KV), the backward's preprocess and dQ conversion, the kvcache append and the device check of indices"
                "#define FA_INST_WAVE32 1" "gpu_kernels/attn_combine.h;gpu_kernels/attn_bwd_prep.h;gpu_kernels/kv_append.h;gpu_kernels/seq_check.h"
                "${symbols}")
  list(APPEND sources ${file})
  foreach(symbol IN LISTS symbols)
    string(APPEND manifest "kernel ${symbol} shared 0 0 0 0 0 any 1 ${file}\n")
  endforeach()
  set(FA_UNIT_SOURCES ${sources} PARENT_SCOPE)
  set(FA_UNIT_SOURCES_ws ${sources_ws} PARENT_SCOPE)
  set(FA_UNIT_MANIFEST "${manifest}" PARENT_SCOPE)
endfunction()

# fa_write_registry(OUT): the registry of every row of both lists, each dtype and wave
# size: a config next to its kernels' launch handles where its vendor is built
# (FA_BUILT_<vendor> true) and its pass too (FA_BUILT_PASS_<pass>, where defined: the
# warpgroup pass needs an sm_90a target), planned (compiled 0, no handles) where not. A build of some
# of a vendor's instances only (the emulated AMD device, cmake/FlashattnAmdEmu.cmake)
# names them in FA_BUILT_NAMES_<vendor>; the vendor's other instances stay planned.
function(fa_write_registry out)
  set(FA_BUILT_cpu TRUE)
  set(externs "")
  set(arrays "")
  set(parts "")
  foreach(pass IN LISTS FA_PASSES)
    set(PASS ${FA_REGISTRY_PASS_${pass}})
    fa_instance_rows(${pass} rows)
    foreach(vendor cuda hip cpu)
      set(body "${body_${vendor}_${PASS}}")
      foreach(row IN LISTS rows)
        fa_row_fields("${row}")
        if(NOT FA_VENDOR STREQUAL vendor)
          continue()
        endif()
        if(vendor STREQUAL "cpu")
          set(smem "FA_CPU_${PASS}_TILE_BYTES(${FA_D}, ${FA_M}, ${FA_N})")
        else()
          set(smem "${FA_SMEM_MACRO_${pass}}(${FA_D}, ${FA_M}, ${FA_N}, ${FA_S})")
        endif()
        foreach(dtype IN LISTS FA_DTYPES)
          fa_instance_name(${pass} ${dtype})
          set(handles "NULL, NULL")
          set(built ${FA_BUILT_${vendor}})
          if(built AND DEFINED FA_BUILT_NAMES_${vendor} AND NOT FA_NAME IN_LIST FA_BUILT_NAMES_${vendor})
            set(built FALSE)
          endif()
          if(built AND DEFINED FA_BUILT_PASS_${pass} AND NOT FA_BUILT_PASS_${pass})
            set(built FALSE)
          endif()
          set(compiled 0)
          if(built)
            set(compiled 1)
          endif()
          if(built AND NOT vendor STREQUAL "cpu")
            fa_instance_symbols(${pass})
            set(handles "")
            foreach(symbol IN LISTS symbols)
              string(APPEND externs "extern const void *const ${symbol}_handle;\n")
              list(APPEND handles "&${symbol}_handle")
            endforeach()
            list(LENGTH handles n_handles)
            if(n_handles EQUAL 1)
              list(APPEND handles NULL)
            endif()
            string(JOIN ", " handles ${handles})
          endif()
          foreach(wave IN LISTS FA_WAVES)
            if(wave STREQUAL "-")
              set(threads ${FA_W})
              set(wave 0)
            else()
              math(EXPR threads "${FA_W} * ${wave}")
            endif()
            set(regs 0)
            if(FA_REGS_MACRO_${pass})
              set(regs "${FA_REGS_MACRO_${pass}}(${threads})")
            endif()
            set(atomic 0)
            set(ordered 0)
            if(pass STREQUAL "bwd" AND NOT vendor STREQUAL "cpu")
              set(atomic "FA_BWD_ATOMIC_DQ_FOR(${FA_VENDOR_${vendor}}, ${wave})")
            elseif(pass STREQUAL "bws")
              set(atomic 1)
              set(ordered 1)
            endif()
            string(APPEND body "    {\"${FA_NAME}\", ${FA_BACKEND_${vendor}}, ${FA_VENDOR_${vendor}}, "
                   "FA_PASS_${PASS}, ${FA_DTYPE_${dtype}}, ${FA_D}, ${FA_M}, ${FA_N}, ${threads}, ${FA_S},\n"
                   "     ${smem}, ${regs}, ${wave}, ${compiled}, ${atomic}, ${FA_PACK_GQA_${pass}}, ${FA_WARPGROUP_${pass}}, "
                   "${ordered}, {${handles}}},\n")
          endforeach()
        endforeach()
      endforeach()
      set(body_${vendor}_${PASS} "${body}")
    endforeach()
  endforeach()
  # One array per vendor and registry pass (the decode rows join the forward's).
  foreach(PASS FWD BWD)
    string(TOLOWER ${PASS} pass)
    foreach(vendor cuda hip cpu)
      if(body_${vendor}_${PASS})
        string(APPEND arrays "static const fa_kernel_config ${vendor}_${pass}[] = {\n${body_${vendor}_${PASS}}};\n\n")
        string(APPEND parts "    {${FA_BACKEND_${vendor}}, FA_PASS_${PASS}, ${vendor}_${pass}, "
               "(int)(sizeof ${vendor}_${pass} / sizeof ${vendor}_${pass}[0])},\n")
      endif()
    endforeach()
  endforeach()
  file(CONFIGURE OUTPUT ${out} CONTENT [==[
/* registry.c - generated by cmake/FlashattnInstances.cmake from src/common/select/
 * fwd_instances.txt, dec_instances.txt, bwd_instances.txt, ws_instances.txt, bws_instances.txt and
 * qreg_instances.txt:
 * every row for each dtype
 * and wave size. Fields in fa_kernel_config's order (select/dispatch.h). */
#include <stddef.h>

#include "gpu_kernels/smem_bytes.h"
#include "select/registry.h"

@externs@
@arrays@const fa_registry_part fa_registry_parts[] = {
@parts@};
const int fa_registry_part_count = (int)(sizeof fa_registry_parts / sizeof fa_registry_parts[0]);
]==] @ONLY)
endfunction()
