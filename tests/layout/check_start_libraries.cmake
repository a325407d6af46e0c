# cmake -DBINARY=path/to/hapmoe -P check_start_libraries.cmake
# Fails if the binary loads libhdf5 or libcurl at start (ldd lists every
# shared library the loader maps, those of its libraries too).
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed (${rc})")
endif()
foreach(lib libhdf5 libcurl)
  if(libs MATCHES "${lib}[^ ]*\\.so")
    message(FATAL_ERROR "${BINARY} loads ${lib} at start:\n${libs}")
  endif()
endforeach()
string(REGEX MATCHALL "\n" found "${libs}")
list(LENGTH found n)
message(STATUS "${BINARY}: ${n} shared libraries, none of HDF5's or curl's")
