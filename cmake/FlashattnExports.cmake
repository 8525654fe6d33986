# FlashattnExports.cmake - libflashattn.so exports exactly the FA_API functions of
# include/flashattn.h, through a linker version script generated from the header.
# Hidden visibility (set on the objects) is not enough on its own: GCC gives the
# resolvers of target_clones functions (the CPU kernels' ifuncs) default visibility
# whatever the attributes say, and archives linked in (cudart_static) bring symbols of
# their own. The link is the one step that sees every object, so the list lives there.

# fa_public_symbols(<header> <out-var>): the names declared with FA_API in <header>,
# sorted. A declaration starts with FA_API and names its function on that same line.
function(fa_public_symbols header out_var)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${header}")
  file(READ "${header}" text)
  string(REGEX MATCHALL "FA_API[^;(\n]*[ *]fa_[a-z0-9_]+[ \t]*\\(" decls "${text}")
  set(names "")
  foreach(decl IN LISTS decls)
    string(REGEX MATCH "fa_[a-z0-9_]+[ \t]*\\($" name "${decl}")
    string(REGEX REPLACE "[ \t]*\\($" "" name "${name}")
    list(APPEND names ${name})
  endforeach()
  list(SORT names)
  set(${out_var} ${names} PARENT_SCOPE)
endfunction()

# fa_export_public_api(<target> <header>): link <target> with a version script that
# keeps the FA_API symbols of <header> global and makes everything else local.
function(fa_export_public_api target header)
  include(CheckLinkerFlag)
  set(map "${PROJECT_BINARY_DIR}/${target}.map")
  fa_public_symbols("${header}" names)
  list(JOIN names ";\n    " globals)
  # Written only when the text changes, so an unrelated reconfigure does not relink.
  file(CONFIGURE OUTPUT "${map}" CONTENT "{\n  global:\n    ${globals};\n  local: *;\n};\n")
  # Editing the header re-runs configure, which regenerates the list.
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${header}")
  check_linker_flag(C "LINKER:--version-script=${map}" FA_LINKER_HAS_VERSION_SCRIPT)
  if(NOT FA_LINKER_HAS_VERSION_SCRIPT)
    message(STATUS "flashattn: the linker takes no version script; exports rely on visibility")
    return()
  endif()
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
endfunction()
