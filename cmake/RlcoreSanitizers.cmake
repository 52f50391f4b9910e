# RLCORE_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer over all of
# rlcore (libtorch itself is not instrumented). RLCORE_FUZZ adds libFuzzer's
# coverage to every target and builds the fuzz targets of tests/fuzz; it needs
# clang. scripts/build.sh --sanitize configures both (./build-sanitize), for
# scripts/test.sh --sanitize and scripts/fuzz.sh.
option(RLCORE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(RLCORE_FUZZ "Build the libFuzzer targets (clang; implies RLCORE_SANITIZE)" OFF)

if(RLCORE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "RLCORE_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  set(RLCORE_SANITIZE ON)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(RLCORE_SANITIZE)
  # UB stops the program (no recovery), so a test or a fuzz run fails on it.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  # -O1, as AddressSanitizer's documentation suggests: quicker to compile than -O2 (docs/testing.md).
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
endif()

# Every test's environment in a sanitized build (worker processes inherit it).
set(RLCORE_SANITIZER_ENV)
if(RLCORE_SANITIZE)
  set(supp ${PROJECT_SOURCE_DIR}/tests/sanitizers)
  set(RLCORE_SANITIZER_ENV
      # handle_segv=0: the fault tests kill workers with SIGSEGV and expect signal 11, not ASan's exit 1.
      "ASAN_OPTIONS=detect_leaks=1:handle_segv=0:strict_string_checks=1:detect_stack_use_after_return=0"
      "LSAN_OPTIONS=suppressions=${supp}/lsan.supp:print_suppressions=0"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=${supp}/ubsan.supp")
endif()
