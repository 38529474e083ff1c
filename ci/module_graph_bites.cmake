# Shows that the module graph check (cmake/pacts_module_graph.cmake) bites:
#
#   cmake -DSOURCE_DIR=<repository> -DBINARY_DIR=<scratch folder> -P ci/module_graph_bites.cmake
#
# Configures the fixture ci/module_graph_fixture twice: without its planted edges it must
# configure; with them (-DPLANT=ON) it must fail, reporting exactly the two planted edges.
cmake_minimum_required(VERSION 3.25)
foreach(v SOURCE_DIR BINARY_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "module graph bites: -D${v}=... is required")
  endif()
endforeach()
set(fixture "${SOURCE_DIR}/ci/module_graph_fixture")

function(configure plant out_rc out_text)
  file(REMOVE_RECURSE "${BINARY_DIR}/plant-${plant}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${fixture}" -B "${BINARY_DIR}/plant-${plant}"
                          -DPLANT=${plant} -DPACTS_SOURCE_DIR=${SOURCE_DIR}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("--- fixture, PLANT=${plant}: exit ${rc}\n${out}${err}")
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()

configure(OFF rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "module graph bites: the fixture without planted edges does not configure")
endif()

configure(ON rc text)
if(rc EQUAL 0)
  message(FATAL_ERROR "module graph bites: the planted edges were not reported")
endif()
set(expected)
string(CONCAT line "conformance reaches kernels: pacts_conformance -> pacts_kernels_host "
                   "(conformance may link spec, reference)")
list(APPEND expected "${line}")
list(APPEND expected
     "kernels reaches conformance: pacts_kernels_test -> pacts_conformance (kernels may link spec)"
     "module graph: 2 edge(s) outside")
foreach(line IN LISTS expected)
  string(FIND "${text}" "${line}" at)
  if(at LESS 0)
    message(FATAL_ERROR "module graph bites: not reported: ${line}")
  endif()
endforeach()
message("module graph bites: both planted edges reported, and nothing else")
