# The module graph (docs/architecture.md), checked on the targets themselves at configure time:
#
#   module        may link (besides itself)
#   spec          nothing
#   reference     spec
#   kernels       spec
#   conformance   spec, reference
#   backends      spec, reference, kernels, conformance
#   fuzz, bench   spec, reference, kernels, conformance, backends
#   apps          everything
#
# A target's module is the first folder of its SOURCE_DIR under the project's source directory
# (kernels/hip and kernels/plugins are kernels). Targets of the top folder (pacts_warnings) and
# imported ones (GTest::gtest, CUDA::cudart_static) belong to no module and may be linked by any.
# pacts_check_module_graph() walks, from every target of the project, the transitive closure of
# LINK_LIBRARIES and INTERFACE_LINK_LIBRARIES (aliases resolved; $<LINK_ONLY:x>,
# $<TARGET_NAME_IF_EXISTS:x> and $<$<condition>:x> taken as x, whatever the condition) and
# fails the configure with one line per offending edge: the path from the target to the module
# it may not reach. In particular the framework's closure (pacts_spec, pacts_reference,
# pacts_conformance) never reaches a kernel or backend library (pacts_kernels*, pacts_backend*),
# and no kernels target reaches the framework.

set(PACTS_MODULE_ALLOWED_spec "")
set(PACTS_MODULE_ALLOWED_reference spec)
set(PACTS_MODULE_ALLOWED_kernels spec)
set(PACTS_MODULE_ALLOWED_conformance spec reference)
set(PACTS_MODULE_ALLOWED_backends spec reference kernels conformance)
set(PACTS_MODULE_ALLOWED_fuzz spec reference kernels conformance backends)
set(PACTS_MODULE_ALLOWED_bench spec reference kernels conformance backends)
set(PACTS_MODULE_ALLOWED_apps spec reference kernels conformance backends fuzz bench)

# Every buildsystem target under `dir`, into `out`.
function(pacts_module_graph_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    pacts_module_graph_targets("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The module of `target` into `out`: "" for the top folder, imported and unknown targets.
function(pacts_module_of target out)
  set(module "")
  if(TARGET "${target}")
    get_target_property(imported "${target}" IMPORTED)
    if(NOT imported)
      get_target_property(dir "${target}" SOURCE_DIR)
      file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${dir}")
      if(NOT rel STREQUAL "" AND NOT rel MATCHES "^[.][.]")
        string(REGEX REPLACE "/.*$" "" module "${rel}")
      endif()
    endif()
  endif()
  set(${out} "${module}" PARENT_SCOPE)
endfunction()

# The project targets `target` links directly (both properties), aliases resolved, into `out`.
function(pacts_module_graph_links target out)
  set(links)
  get_target_property(type "${target}" TYPE)
  set(properties INTERFACE_LINK_LIBRARIES)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    list(APPEND properties LINK_LIBRARIES)
  endif()
  foreach(property IN LISTS properties)
    get_target_property(items "${target}" ${property})
    if(NOT items)
      continue()
    endif()
    foreach(item IN LISTS items)
      # $<LINK_ONLY:x>, $<TARGET_NAME_IF_EXISTS:x> and $<$<condition>:x> name x.
      while(item MATCHES "^[$]<([A-Z_]+|[$]<[^>]*>):(.*)>$")
        set(item "${CMAKE_MATCH_2}")
      endwhile()
      if(item MATCHES "^::@" OR NOT TARGET "${item}")
        continue()
      endif()
      get_target_property(aliased "${item}" ALIASED_TARGET)
      if(aliased)
        set(item "${aliased}")
      endif()
      get_target_property(imported "${item}" IMPORTED)
      if(NOT imported)
        list(APPEND links "${item}")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES links)
  set(${out} ${links} PARENT_SCOPE)
endfunction()

# Fails the configure when an edge of the project's targets leaves the graph above.
function(pacts_check_module_graph)
  pacts_module_graph_targets("${PROJECT_SOURCE_DIR}" all)
  set(offences)
  foreach(start IN LISTS all)
    get_target_property(type "${start}" TYPE)
    if(type STREQUAL "UTILITY")
      continue()
    endif()
    pacts_module_of("${start}" module)
    if(module STREQUAL "" OR NOT DEFINED PACTS_MODULE_ALLOWED_${module})
      continue()
    endif()
    set(allowed ${PACTS_MODULE_ALLOWED_${module}} ${module})
    # Breadth first over the link closure; path_<target> is how it was reached.
    set(queue "${start}")
    set(seen "${start}")
    set(path_${start} "${start}")
    while(queue)
      list(POP_FRONT queue current)
      pacts_module_graph_links("${current}" links)
      foreach(next IN LISTS links)
        if(next IN_LIST seen)
          continue()
        endif()
        list(APPEND seen "${next}")
        set(path_${next} "${path_${current}} -> ${next}")
        pacts_module_of("${next}" next_module)
        if(NOT next_module STREQUAL "" AND NOT next_module IN_LIST allowed)
          list(JOIN PACTS_MODULE_ALLOWED_${module} ", " may)
          if(may STREQUAL "")
            set(may "nothing")
          endif()
          list(APPEND offences
               "${module} reaches ${next_module}: ${path_${next}} (${module} may link ${may})")
          continue()  # one line per offending edge; what lies beyond it is that module's affair
        endif()
        list(APPEND queue "${next}")
      endforeach()
    endwhile()
  endforeach()
  if(offences)
    list(REMOVE_DUPLICATES offences)
    list(LENGTH offences count)
    list(JOIN offences "\n  " text)
    message(FATAL_ERROR "module graph: ${count} edge(s) outside docs/architecture.md's graph:\n"
                        "  ${text}")
  endif()
endfunction()
