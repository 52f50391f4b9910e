# Third-party packages. All come from Debian (see scripts/setup.sh).
# Shared by the in-tree build and the installed rlcoreConfig.cmake.
include(CMakeFindDependencyMacro)
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
# The CUDA flavour: a libtorch built with CUDA (the PyPI wheel's, or one a user
# brings through Torch_DIR). Device-specific sources are chosen from this, not
# guarded by #ifdefs across the engines (docs/gpu.md).
# Recorded in the installed rlcoreConfig.cmake, so plugins find the same libtorch.
set(RLCORE_TORCH_PREFIX "${TORCH_INSTALL_PREFIX}")
if(CAFFE2_USE_CUDA AND TORCH_CUDA_LIBRARIES)
  set(RLCORE_WITH_CUDA ON CACHE INTERNAL "libtorch has CUDA")
else()
  set(RLCORE_WITH_CUDA OFF CACHE INTERNAL "libtorch has CUDA")
endif()
# The PyPI wheel's libtorch exports its own, partial copy of std::filesystem
# (libtorch.so calls a null pointer in remove_all). Naming the shared libstdc++
# before any library makes it the first provider in every program's lookup
# scope, so rlcore and its plugins use the real one. By path, because a
# compiler that links libstdc++ statically (a private GCC build in /opt, as on
# the lent GPU machine) would otherwise put nothing first. Harmless where
# libtorch exports none.
execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=libstdc++.so
                OUTPUT_VARIABLE rlcore_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT IS_ABSOLUTE "${rlcore_libstdcxx}")
  find_library(RLCORE_LIBSTDCXX NAMES libstdc++.so.6
               PATHS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES} /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib)
  set(rlcore_libstdcxx "${RLCORE_LIBSTDCXX}")
endif()
if(NOT rlcore_libstdcxx)
  message(FATAL_ERROR "rlcore: no shared libstdc++ found for ${CMAKE_CXX_COMPILER} (libstdc++.so or libstdc++.so.6)")
endif()
message(STATUS "rlcore: libstdc++ linked first: ${rlcore_libstdcxx}")
foreach(kind EXE SHARED MODULE)
  string(FIND "${CMAKE_${kind}_LINKER_FLAGS}" "${rlcore_libstdcxx}" found)
  if(found EQUAL -1)
    set(CMAKE_${kind}_LINKER_FLAGS
        "${CMAKE_${kind}_LINKER_FLAGS} -Wl,--push-state,--no-as-needed ${rlcore_libstdcxx} -Wl,--pop-state")
  endif()
endforeach()
# rlcore_flavour_sources(<var> <dir>): what differs per device, <dir>/cuda_*.cc
# in the CUDA flavour and <dir>/no_cuda_*.cc (the same functions, answering
# "no CUDA") in the CPU flavour.
function(rlcore_flavour_sources var dir)
  if(RLCORE_WITH_CUDA)
    file(GLOB sources CONFIGURE_DEPENDS ${dir}/cuda_*.cc)
  else()
    file(GLOB sources CONFIGURE_DEPENDS ${dir}/no_cuda_*.cc)
  endif()
  set(${var} ${sources} PARENT_SCOPE)
endfunction()
if(NOT rlcore_FIND_QUIETLY)
  message(STATUS "rlcore: libtorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}), CUDA flavour: ${RLCORE_WITH_CUDA}")
endif()
find_package(nlohmann_json 3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(spdlog REQUIRED)
# The control plane between controller and workers (libzmq3-dev + cppzmq-dev).
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
# The python tool's system-call filter (libseccomp-dev; docs/decisions/0014).
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)

# rlcore_use_system_fmt(<target>): Debian's spdlog is built against Debian's
# fmt, while a libtorch 2.x puts its own, newer fmt headers on the -isystem path
# ahead of /usr/include. <target>'s sources see the fmt spdlog was built with
# through a directory given with -I, which the compiler searches before every
# -isystem one; the libtorch headers rlcore includes (ATen, c10d) use no fmt.
# For the whole target, not per source: a source with options of its own is
# left out of a unity build's batches. A no-op when libtorch has no fmt of its own.
function(rlcore_use_system_fmt target)
  get_target_property(fmt_dirs fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  list(GET fmt_dirs 0 fmt_dir)
  set(torch_fmt FALSE)
  foreach(dir ${TORCH_INCLUDE_DIRS})
    # Debian's libtorch uses Debian's fmt (both in /usr/include): nothing to shim.
    if(EXISTS ${dir}/fmt/core.h AND NOT dir STREQUAL fmt_dir)
      set(torch_fmt TRUE)
    endif()
  endforeach()
  if(NOT torch_fmt)
    return()
  endif()
  set(shim ${PROJECT_BINARY_DIR}/system-fmt)
  if(NOT EXISTS ${shim}/fmt)
    file(MAKE_DIRECTORY ${shim})
    file(CREATE_LINK ${fmt_dir}/fmt ${shim}/fmt SYMBOLIC)
  endif()
  target_include_directories(${target} BEFORE PRIVATE ${shim})
endfunction()
