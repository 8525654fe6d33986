# check_exports.cmake - ctest script: the dynamic symbols libflashattn.so defines are
# exactly the FA_API functions of include/flashattn.h, nothing missing, nothing leaked.
# Run as: cmake -DNM=nm -DLIBRARY=libflashattn.so -DHEADER=flashattn.h
#               -DMODULE=cmake/FlashattnExports.cmake -P check_exports.cmake
cmake_minimum_required(VERSION 3.24) # IN_LIST and the other policies of the project
include("${MODULE}")
fa_public_symbols("${HEADER}" expected)
if(NOT expected)
  message(FATAL_ERROR "no FA_API declarations found in ${HEADER}")
endif()

execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${rc}): ${errors}")
endif()

# Lines are "address type name"; a symbol version (name@@VER) is not part of the name.
string(REGEX MATCHALL "[^\n]+" lines "${listing}")
set(exported "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^.*[ \t]" "" name "${line}")
  string(REGEX REPLACE "@.*$" "" name "${name}")
  list(APPEND exported "${name}")
endforeach()
list(REMOVE_DUPLICATES exported)
list(SORT exported)

set(missing "")
foreach(name IN LISTS expected)
  if(NOT name IN_LIST exported)
    list(APPEND missing "${name}")
  endif()
endforeach()
set(leaked "")
foreach(name IN LISTS exported)
  if(NOT name IN_LIST expected)
    list(APPEND leaked "${name}")
  endif()
endforeach()
if(missing OR leaked)
  message(FATAL_ERROR "exports of ${LIBRARY} differ from the FA_API list of ${HEADER}\n"
                      "  missing: ${missing}\n  leaked: ${leaked}")
endif()
list(LENGTH expected count)
message(STATUS "${count} exported symbols, exactly the public API")
