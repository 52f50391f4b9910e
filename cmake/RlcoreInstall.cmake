# `cmake --install` lays out the SDK package: headers, librlcore_sdk and
# librlcore_core, the static libraries beside the SDK (rlcore::model,
# rlcore::tokenizer, rlcore::safetensors), the rlcore executable, the in-tree
# plugins, and a find_package(rlcore) config that provides them and rlcore_add_plugin().
include(CMakePackageConfigHelpers)
set(RLCORE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlcore)

set_target_properties(rlcore_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(rlcore_core PROPERTIES EXPORT_NAME core)
install(TARGETS rlcore_sdk rlcore_core rlcore_model rlcore_tokenizer rlcore_safetensors EXPORT rlcoreTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS rlcore RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# librlcore_core reads parquet through Arrow: its two libraries go beside it.
install(FILES ${RLCORE_ARROW_LIBRARY} ${RLCORE_PARQUET_LIBRARY} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY sdk/include/ libs/model/include/ libs/tokenizer/include/ libs/safetensors/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rlcoreTargets NAMESPACE rlcore:: DESTINATION ${RLCORE_CMAKE_INSTALL_DIR})

configure_package_config_file(cmake/rlcoreConfig.cmake.in ${PROJECT_BINARY_DIR}/rlcoreConfig.cmake
  INSTALL_DESTINATION ${RLCORE_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rlcoreConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/rlcoreConfig.cmake
  ${PROJECT_BINARY_DIR}/rlcoreConfigVersion.cmake
  cmake/RlcoreAddPlugin.cmake
  DESTINATION ${RLCORE_CMAKE_INSTALL_DIR})
