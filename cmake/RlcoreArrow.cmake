# Apache Arrow C++ (libarrow + libparquet): rlcore's parquet reader and writer
# (docs/decisions/0009-parquet-with-arrow.md). scripts/setup_arrow.sh unpacks it
# into .deps/arrow-<version>; RLCORE_ARROW_DIR points at any other Arrow >= 26
# (include/arrow, include/parquet, lib/libarrow.so*, lib/libparquet.so*).
# Only core/src/data_parquet/ sees Arrow's headers, which need C++20.
set(RLCORE_ARROW_DEFAULT_DIR ${PROJECT_SOURCE_DIR}/.deps/arrow-26.0.1)
set(RLCORE_ARROW_DIR "$ENV{RLCORE_ARROW_DIR}" CACHE PATH "Arrow C++ prefix (empty: ${RLCORE_ARROW_DEFAULT_DIR})")
if(RLCORE_ARROW_DIR)
  set(rlcore_arrow_prefix ${RLCORE_ARROW_DIR})
else()
  set(rlcore_arrow_prefix ${RLCORE_ARROW_DEFAULT_DIR})
endif()
foreach(library arrow parquet)
  string(TOUPPER ${library} upper)
  find_library(RLCORE_${upper}_LIBRARY NAMES ${library} lib${library}.so.2600
               PATHS ${rlcore_arrow_prefix}/lib NO_DEFAULT_PATH)
  if(NOT RLCORE_${upper}_LIBRARY OR NOT EXISTS ${rlcore_arrow_prefix}/include/${library})
    message(FATAL_ERROR "rlcore: no Arrow C++ lib${library} in ${rlcore_arrow_prefix}: run scripts/setup_arrow.sh "
                        "(scripts/build.sh does) or set RLCORE_ARROW_DIR to an Arrow >= 26 prefix")
  endif()
  add_library(rlcore::${library} SHARED IMPORTED)
  set_target_properties(rlcore::${library} PROPERTIES
    IMPORTED_LOCATION ${RLCORE_${upper}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${rlcore_arrow_prefix}/include)
endforeach()
message(STATUS "rlcore: Arrow C++ from ${rlcore_arrow_prefix}")
