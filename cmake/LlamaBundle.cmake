# llama.cpp's source is not part of this repository. The npm package node-llama-cpp (a dev
# dependency, `npm ci` installs it) ships it as a git bundle; the files a build needs are checked
# out of it into ${CMAKE_BINARY_DIR}/llama.cpp-ref at configure time: cloned once (without a work
# tree), each file checked out the first time some part of the build asks for it, and all again
# only when the bundle's commit changes (a stamp file records the commit and the files).
#
#   llama_bundle_checkout(<dir_var> FILES <path>...)
#
# sets <dir_var> to the checkout's root (the files at <dir_var>/<path>) and LLAMA_COMMIT to the
# bundle's commit, in the caller's scope. Used by the root build (the codebook grids of the IQ
# types, cmake/IqGrids.cmake) and by tests/ (ggml's quantizers, compiled as the tests' oracle).

set(LLAMA_BUNDLE ${PROJECT_SOURCE_DIR}/node_modules/node-llama-cpp/llama/gitRelease.bundle)

function(llama_bundle_checkout dir_var)
  cmake_parse_arguments(ARG "" "" "FILES" ${ARGN})
  find_package(Git QUIET)
  if(NOT GIT_FOUND)
    message(FATAL_ERROR "git is needed to unpack llama.cpp's source from ${LLAMA_BUNDLE} "
      "(scripts/setup.sh installs it: apt-get install git)")
  endif()
  if(NOT EXISTS ${LLAMA_BUNDLE})
    message(FATAL_ERROR "Missing ${LLAMA_BUNDLE}: llama.cpp's source, from which the build takes "
      "the IQ types' codebook grids (and the tests ggml's quantizers), ships in the npm package "
      "node-llama-cpp. Run `npm ci` (scripts/setup.sh does) in ${PROJECT_SOURCE_DIR}.")
  endif()
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${LLAMA_BUNDLE})
  execute_process(COMMAND ${GIT_EXECUTABLE} bundle list-heads ${LLAMA_BUNDLE}
    OUTPUT_VARIABLE heads RESULT_VARIABLE rc ERROR_VARIABLE err)
  string(REGEX MATCH "^[0-9a-f]+" commit "${heads}")
  if(NOT rc EQUAL 0 OR NOT commit)
    message(FATAL_ERROR "${LLAMA_BUNDLE} is not a readable git bundle (${err}); "
      "reinstall it with `npm ci` in ${PROJECT_SOURCE_DIR}.")
  endif()

  set(ref ${CMAKE_BINARY_DIR}/llama.cpp-ref)
  set(stamp_file ${ref}/.leapconv-checkout)
  # the stamp: "<commit> <file>;<file>;..."
  set(have_commit "")
  set(have_files "")
  if(EXISTS ${stamp_file})
    file(READ ${stamp_file} stamp)
    if(stamp MATCHES "^([0-9a-f]+) (.*)$")
      set(have_commit ${CMAKE_MATCH_1})
      set(have_files "${CMAKE_MATCH_2}")
    endif()
  endif()
  if(NOT have_commit STREQUAL commit OR NOT EXISTS ${ref}/.git)
    message(STATUS "llama.cpp source: cloning ${commit} from ${LLAMA_BUNDLE}")
    file(REMOVE_RECURSE ${ref})
    execute_process(COMMAND ${GIT_EXECUTABLE} clone --quiet --no-checkout ${LLAMA_BUNDLE} ${ref}
      RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "could not clone ${LLAMA_BUNDLE} into ${ref}")
    endif()
    set(have_files "")
  endif()
  set(missing "")
  foreach(f ${ARG_FILES})
    if(NOT f IN_LIST have_files OR NOT EXISTS ${ref}/${f})
      list(APPEND missing ${f})
    endif()
  endforeach()
  if(missing)
    message(STATUS "llama.cpp source: checking out ${missing}")
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${ref} checkout --quiet ${commit} -- ${missing}
      RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "could not check out ${missing} from ${LLAMA_BUNDLE} into ${ref}")
    endif()
    list(APPEND have_files ${missing})
    list(REMOVE_DUPLICATES have_files)
    file(WRITE ${stamp_file} "${commit} ${have_files}")
  endif()
  set(${dir_var} ${ref} PARENT_SCOPE)
  set(LLAMA_COMMIT ${commit} PARENT_SCOPE)
endfunction()
