# The libraries, their folders and the arrows between them: the one table
# docs/architecture.md draws. Two checks read it:
#   - at configure time (hapmoe_check_link_arrows, root CMakeLists.txt):
#     every hapmoe library and third-party package a target links must be
#     one of its arrows here;
#   - the test layout.includes (check_includes.cmake): every #include of a
#     library's files must name its own folder, a folder its arrows allow,
#     a third-party header its arrows allow, or the standard/POSIX library.
#
# One entry per library: "name|folder|hapmoe libraries|third-party".
# Third-party names: nlohmann, cxxopts, hdf5, mpi, omp. "mpi@comm_mpi.cpp"
# allows mpi.h in that one file of the folder only.
set(HAPMOE_LAYOUT
    "costmodel|costmodel||"
    "partition|partition|costmodel|"
    "engine|engine|costmodel partition|omp mpi@comm_mpi.cpp"
    "inputs|io/inputs|costmodel|nlohmann"
    "report|io/report|costmodel inputs|"
    "archive|io/archive|costmodel engine inputs report|hdf5 nlohmann"
    "profile|io/profile|costmodel archive|"
    "megatron|io/megatron|costmodel partition inputs report|"
    "cli|io/cli|costmodel partition engine inputs report archive profile megatron|cxxopts nlohmann")

# Splits one entry into <prefix>_NAME, _FOLDER, _DEPS (list), _EXT (list).
function(hapmoe_layout_entry entry prefix)
  string(REPLACE "|" ";" _f "${entry}")
  list(GET _f 0 _name)
  list(GET _f 1 _folder)
  list(GET _f 2 _deps)
  list(GET _f 3 _ext)
  separate_arguments(_deps UNIX_COMMAND "${_deps}")
  separate_arguments(_ext UNIX_COMMAND "${_ext}")
  set(${prefix}_NAME ${_name} PARENT_SCOPE)
  set(${prefix}_FOLDER ${_folder} PARENT_SCOPE)
  set(${prefix}_DEPS ${_deps} PARENT_SCOPE)
  set(${prefix}_EXT ${_ext} PARENT_SCOPE)
endfunction()

# Configure time: each library's target (hapmoe_<name>) links only hapmoe
# libraries and packages among its arrows, and only ones its files include
# (a folder of that library, or the package's header), so a target names no
# dependency it does not use.
function(hapmoe_check_link_arrows source_dir)
  set(_pkg_nlohmann_json::nlohmann_json nlohmann)
  set(_pkg_cxxopts::cxxopts cxxopts)
  set(_pkg_HDF5::HDF5 hdf5)
  set(_pkg_MPI::MPI_CXX mpi)
  set(_pkg_OpenMP::OpenMP_CXX omp)
  set(_hdr_nlohmann "nlohmann/")
  set(_hdr_cxxopts "cxxopts.hpp")
  set(_hdr_hdf5 "hdf5.h")
  set(_hdr_mpi "mpi.h")
  set(_hdr_omp "omp.h")
  foreach(_e IN LISTS HAPMOE_LAYOUT)
    hapmoe_layout_entry("${_e}" L)
    set(_target hapmoe_${L_NAME})
    if(NOT TARGET ${_target})
      message(FATAL_ERROR "tests/layout/arrows.cmake: no target ${_target}")
    endif()
    file(GLOB _files ${source_dir}/${L_FOLDER}/*.h ${source_dir}/${L_FOLDER}/*.cpp)
    set(_text "")
    foreach(_file IN LISTS _files)
      file(STRINGS ${_file} _lines REGEX "^[ \t]*#[ \t]*include")
      string(APPEND _text "${_lines};")
    endforeach()
    set(_ext_names)
    foreach(_x IN LISTS L_EXT)
      string(REGEX REPLACE "@.*" "" _x "${_x}")
      list(APPEND _ext_names ${_x})
    endforeach()
    get_target_property(_links ${_target} LINK_LIBRARIES)
    foreach(_l IN LISTS _links)
      if(_l STREQUAL "hapmoe_flags")
        continue()
      elseif(_l MATCHES "^hapmoe::(.+)$")
        set(_dep ${CMAKE_MATCH_1})
        if(NOT _dep IN_LIST L_DEPS)
          message(FATAL_ERROR "${_target} links hapmoe::${_dep}, not an arrow of ${L_NAME} "
                              "(tests/layout/arrows.cmake)")
        endif()
        foreach(_e2 IN LISTS HAPMOE_LAYOUT)
          hapmoe_layout_entry("${_e2}" D)
          if(D_NAME STREQUAL _dep)
            string(FIND "${_text}" "\"${D_FOLDER}/" _at)
            if(_at EQUAL -1)
              message(FATAL_ERROR "${_target} links hapmoe::${_dep}, but no file of "
                                  "${L_FOLDER} includes ${D_FOLDER}/")
            endif()
          endif()
        endforeach()
      elseif(DEFINED _pkg_${_l})
        set(_p ${_pkg_${_l}})
        if(NOT _p IN_LIST _ext_names)
          message(FATAL_ERROR "${_target} links ${_l}, which ${L_NAME} may not use "
                              "(tests/layout/arrows.cmake)")
        endif()
        string(FIND "${_text}" "<${_hdr_${_p}}" _at)
        if(_at EQUAL -1)
          message(FATAL_ERROR "${_target} links ${_l}, but no file of ${L_FOLDER} includes "
                              "<${_hdr_${_p}}>")
        endif()
      else()
        message(FATAL_ERROR "${_target} links ${_l}: unknown to tests/layout/arrows.cmake")
      endif()
    endforeach()
  endforeach()
endfunction()
