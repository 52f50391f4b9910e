# Third-party packages. All come from Debian (see scripts/setup.sh).
# Shared by the in-tree build and the installed rlcoreConfig.cmake.
include(CMakeFindDependencyMacro)
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
# The CUDA flavour: a libtorch built with CUDA (the PyPI wheel's, or one a user
# brings through Torch_DIR). Device-specific sources are chosen from this, not
# guarded by #ifdefs across the engines (docs/gpu.md).
if(CAFFE2_USE_CUDA AND TORCH_CUDA_LIBRARIES)
  set(RLCORE_WITH_CUDA ON)
else()
  set(RLCORE_WITH_CUDA OFF)
endif()
find_package(nlohmann_json 3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(spdlog REQUIRED)
# The control plane between controller and workers (libzmq3-dev + cppzmq-dev).
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
