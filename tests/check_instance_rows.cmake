# check_instance_rows.cmake - cmake -P test of the row checks of
# cmake/FlashattnInstances.cmake: the real forward list with ROW appended is read as the
# build reads it; a malformed or repeated row must stop it with its reason (the test
# looks for it), an empty ROW must pass. Args: -DMODULE=<FlashattnInstances.cmake> -DLISTS=<select dir>
# -DWORK=<scratch dir> -DROW=<row text>.
cmake_minimum_required(VERSION 3.24) # the policies of the build that includes the module
file(MAKE_DIRECTORY ${WORK})
file(READ ${LISTS}/fwd_instances.txt rows)
file(WRITE ${WORK}/fwd_instances.txt "${rows}${ROW}\n")
set(FA_INSTANCE_DIR ${WORK})
include(${MODULE})
fa_instance_rows(fwd read)
list(LENGTH read count)
message(STATUS "read ${count} rows")
