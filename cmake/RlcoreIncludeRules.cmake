# Who may include what (docs/core-map.md#floors): plugins include the SDK and the
# libraries beside it that they link, never a core header; a library includes the
# SDK and itself; the SDK includes neither. The build's include paths already
# keep a header of an unlinked library out of reach; this check says so by name,
# at configure time, and also catches a relative path around them.
#
# rlcore_check_include_rules(<what> <folder> [<library>...]) fails when a source
# under <folder> includes rlcore/<x>/... for an <x> of core, model, tokenizer or
# safetensors that is not among the <library> names, or includes a path out of
# the source tree's other floors ("../" into core/, libs/ or sdk/src).
# In script mode: cmake -DWHAT=... -DFOLDER=... "-DLIBRARIES=a;b" -P RlcoreIncludeRules.cmake
if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.22)
endif()
set(RLCORE_INCLUDE_RULED_LIBRARIES core model tokenizer safetensors)

# Stops the configure step listing the problems, if there are any.
function(rlcore_fail_on_include_problems)
  if(ARGN)
    list(JOIN ARGN "\n  " text)
    message(FATAL_ERROR "include rules (docs/core-map.md#floors):\n  ${text}")
  endif()
endfunction()

function(rlcore_check_include_rules what folder)
  set(linked ${ARGN})
  file(GLOB_RECURSE sources "${folder}/*.cc" "${folder}/*.h" "${folder}/*.cu")
  set(problems)
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line IN LISTS includes)
      if(line MATCHES "[\"<]rlcore/([a-z_]+)/")
        set(library ${CMAKE_MATCH_1})
        if(library IN_LIST RLCORE_INCLUDE_RULED_LIBRARIES AND NOT library IN_LIST linked)
          list(APPEND problems "${source}: includes rlcore/${library}/..., but ${what} does not link rlcore::${library}")
        endif()
      elseif(line MATCHES "[\"<](\\.\\./)+(core|libs|sdk/src)/")
        list(APPEND problems "${source}: includes ${CMAKE_MATCH_2}/ by a relative path, around the include rules")
      endif()
    endforeach()
  endforeach()
  rlcore_fail_on_include_problems(${problems})
endfunction()

# The rule-bound libraries <target> links, directly or through the libraries it links.
function(rlcore_ruled_libraries_of target out)
  set(seen)
  set(found)
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    if(current IN_LIST seen OR NOT TARGET ${current})
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(aliased ${current} ALIASED_TARGET)
    if(aliased)
      list(APPEND queue ${aliased})
      continue()
    endif()
    foreach(library IN LISTS RLCORE_INCLUDE_RULED_LIBRARIES)
      if(current STREQUAL "rlcore_${library}")
        list(APPEND found ${library})
      endif()
    endforeach()
    get_target_property(type ${current} TYPE)
    set(links)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${current} LINK_LIBRARIES)
      if(direct)
        list(APPEND links ${direct})
      endif()
    endif()
    get_target_property(interface ${current} INTERFACE_LINK_LIBRARIES)
    if(interface)
      list(APPEND links ${interface})
    endif()
    foreach(link IN LISTS links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
      list(APPEND queue ${link})
    endforeach()
  endwhile()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Checks every source folder of <directory>'s targets against what they link together.
function(rlcore_check_directory_include_rules what directory)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  set(linked)
  foreach(target IN LISTS targets)
    rlcore_ruled_libraries_of(${target} libraries)
    list(APPEND linked ${libraries})
  endforeach()
  rlcore_check_include_rules("${what}" "${directory}" ${linked})
endfunction()

# Within the core: rlcore_check_core_layering(<what> <folder> <other folder>...)
# fails when a source under <folder> includes a header of an <other folder> of
# the core, private ("trainer/batch_plan.h", under core/src) or public
# ("rlcore/core/trainer/rl_trainer.h", under core/include): the worker roles never
# reach into the controller, whose side of the contract they only see in workers/,
# and the config floor, which both read, reaches into neither.
function(rlcore_check_core_layering what folder)
  file(GLOB_RECURSE sources "${folder}/*.cc" "${folder}/*.h")
  set(problems)
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line IN LISTS includes)
      foreach(other IN LISTS ARGN)
        if(line MATCHES "[\"<]${other}/")
          list(APPEND problems "${source}: includes ${other}/..., which ${what} may not")
        elseif(line MATCHES "[\"<]rlcore/core/${other}/")
          list(APPEND problems "${source}: includes rlcore/core/${other}/..., which ${what} may not")
        endif()
      endforeach()
    endforeach()
  endforeach()
  rlcore_fail_on_include_problems(${problems})
endfunction()

# Between plugins: rlcore_check_plugin_floor(<what> <folder> <other plugin folder>...)
# fails when a source under <folder> includes a header of an <other plugin folder>:
# by its folder's name ("reward/json_lines_process.h", through plugins/ on the
# include path), by a relative path ("../reward/..."), or by a path its public
# include directory offers ("json_lines_process.h" from a linked rlcore_reward).
# What several plugins share lives in a shared folder (plugins/common/,
# plugins/train-common/), which is never an <other plugin folder>.
function(rlcore_check_plugin_floor what folder)
  file(GLOB_RECURSE sources "${folder}/*.cc" "${folder}/*.h" "${folder}/*.cu")
  set(problems)
  foreach(source IN LISTS sources)
    get_filename_component(source_dir "${source}" DIRECTORY)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][^\">]+[\">]")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*" "\\1" path "${line}")
      get_filename_component(beside "${source_dir}/${path}" ABSOLUTE)
      string(FIND "${beside}/" "${folder}/" own_prefix)
      if(EXISTS "${beside}" AND own_prefix EQUAL 0)
        continue()  # its own header, beside it
      endif()
      string(REGEX REPLACE "^(\\.\\./)+" "" unrelative "${path}")
      foreach(other IN LISTS ARGN)
        get_filename_component(name "${other}" NAME)
        if(unrelative MATCHES "^${name}/")
          list(APPEND problems "${source}: includes ${unrelative}, a header of the plugin plugins/${name}, which ${what} may not")
        elseif(path STREQUAL unrelative AND NOT EXISTS "${folder}/${path}" AND EXISTS "${other}/${path}")
          list(APPEND problems "${source}: includes ${path}, a header of the plugin plugins/${name} (its include directory), which ${what} may not")
        endif()
      endforeach()
    endforeach()
  endforeach()
  rlcore_fail_on_include_problems(${problems})
endfunction()

# Namespaces follow folders: rlcore_check_core_namespaces(<core dir>) fails when a
# file of core/src/<folder>/ or core/include/rlcore/core/<folder>/ opens a
# namespace of rlcore other than rlcore::<folder> (or one inside it); a block
# that only forward-declares another folder's class is allowed.
function(rlcore_check_core_namespaces core_dir)
  file(GLOB_RECURSE sources "${core_dir}/src/*/*.cc" "${core_dir}/src/*/*.h" "${core_dir}/include/rlcore/core/*/*.h")
  set(problems)
  foreach(source IN LISTS sources)
    file(RELATIVE_PATH relative "${core_dir}" "${source}")
    string(REGEX REPLACE "^(src|include/rlcore/core)/([a-z_]+)/.*" "\\2" folder "${relative}")
    file(READ "${source}" text)
    string(REGEX REPLACE "namespace rlcore::[a-z_:]+ {\n(class|struct) [A-Za-z]+;\n}" "" text "${text}")
    string(REGEX MATCHALL "(^|\n)namespace rlcore[a-z_:]* {" opened "${text}")
    foreach(namespace IN LISTS opened)
      string(REGEX REPLACE "^\n?namespace ([a-z_:]+) {$" "\\1" namespace "${namespace}")
      if(NOT namespace MATCHES "^rlcore::${folder}(::|$)")
        list(APPEND problems "${source}: namespace ${namespace} in folder ${folder} (namespaces follow folders: rlcore::${folder})")
      endif()
    endforeach()
  endforeach()
  rlcore_fail_on_include_problems(${problems})
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(DEFINED NAMESPACES_OF)
    rlcore_check_core_namespaces("${NAMESPACES_OF}")
  elseif(DEFINED OTHER_PLUGINS)
    rlcore_check_plugin_floor("${WHAT}" "${FOLDER}" ${OTHER_PLUGINS})
  elseif(DEFINED FORBIDDEN)
    rlcore_check_core_layering("${WHAT}" "${FOLDER}" ${FORBIDDEN})
  else()
    rlcore_check_include_rules("${WHAT}" "${FOLDER}" ${LIBRARIES})
  endif()
endif()
