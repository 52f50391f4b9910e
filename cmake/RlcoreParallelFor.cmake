# rlcore_parallel_for_sources(<target> <source>...): the at::parallel_for loops in
# these sources run on libtorch's intra-op threads. ATen's OpenMP parallel_for is
# a header template that forks only where the calling file is compiled with
# OpenMP; elsewhere it quietly runs the whole range on the calling thread. The
# sources get -fopenmp and the target links libgomp, the OpenMP runtime libtorch
# itself uses (Debian's and the PyPI wheel's alike), so at::set_num_threads and
# OMP_NUM_THREADS govern these loops as they do libtorch's own. The sources skip
# the sdk PCH, which is built without OpenMP. Another compiler would bring a
# second OpenMP runtime into the process; its loops stay on one thread.
find_package(OpenMP COMPONENTS CXX)

function(rlcore_parallel_for_sources target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR NOT OpenMP_CXX_FOUND)
    message(STATUS "rlcore: ${target}'s parallel_for loops run on one thread (no GNU OpenMP with ${CMAKE_CXX_COMPILER_ID})")
    return()
  endif()
  set_property(SOURCE ${ARGN} TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS ${OpenMP_CXX_FLAGS})
  set_property(SOURCE ${ARGN} TARGET_DIRECTORY ${target} PROPERTY SKIP_PRECOMPILE_HEADERS ON)
  # The runtime only: OpenMP::OpenMP_CXX would put -fopenmp on all the target's sources and its PCH.
  target_link_libraries(${target} PRIVATE ${OpenMP_CXX_LIBRARIES})
  foreach(source IN LISTS ARGN)
    set_property(GLOBAL APPEND PROPERTY RLCORE_PARALLEL_FOR_SOURCES "${target}|${source}")
  endforeach()
endfunction()
