# rlcore_add_plugin(<target> <sources...> [LIBS <libs...>])
#
# Builds an rlcore plugin: a MODULE library linked against rlcore::sdk with
# hidden visibility, so its only export is the RLCORE_PLUGIN entry point.
# Installed with the SDK for third-party plugins (find_package(rlcore)).
function(rlcore_add_plugin target)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  add_library(${target} MODULE ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${target} PRIVATE rlcore::sdk ${ARG_LIBS})
  set_target_properties(${target} PROPERTIES
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  # Catch unresolved symbols when the plugin is linked, not when it is loaded
  # (not under the sanitizers: their runtime is in the executable that loads it).
  if(NOT RLCORE_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  if(DEFINED RLCORE_PLUGIN_BUILD_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${RLCORE_PLUGIN_BUILD_DIR})
  endif()
  if(DEFINED RLCORE_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${RLCORE_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
