# rlcore_reuse_pch(<target> <from>): <target> compiles with <from>'s precompiled
# header. The header is built -fPIC (for a shared library) and gcc ignores a PCH
# built with other pic/pie flags, so an executable reusing it is compiled -fPIC as
# well (instead of CMake's -fPIE; it still links as a PIE).
function(rlcore_reuse_pch target from)
  target_precompile_headers(${target} REUSE_FROM ${from})
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
endfunction()

# rlcore_use_sdk_pch(<target>): <target> compiles with rlcore_sdk's precompiled ATen header.
function(rlcore_use_sdk_pch target)
  rlcore_reuse_pch(${target} rlcore_sdk)
endfunction()
