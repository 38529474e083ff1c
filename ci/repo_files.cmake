# The files of a source tree that the checks of ci/ read (included by ci/link_check.cmake and
# ci/target_check.cmake, run with cmake -P):
#   pacts_check_args(CHECK EXCLUDE)      the check's arguments: -DSOURCE_DIR (required, a folder)
#                                        as `root`, -DEXCLUDE (folders left out, comma-separated;
#                                        default EXCLUDE) as the list `exclude_dirs`, both set in
#                                        the caller; CHECK names the check in the errors.
#   pacts_repo_files(ROOT OUT)           OUT: paths relative to ROOT. When ROOT is the top of a git
#                                        work tree, the files git lists (tracked, and untracked
#                                        ones it does not ignore); otherwise every file under ROOT
#                                        but .git, build folders and the outputs of runs.
#   pacts_drop_dirs(FILES_VAR DIRS)      removes from the list FILES_VAR the paths under any of
#                                        the folders DIRS (paths relative to the same root).
function(pacts_repo_files root out)
  set(files)
  set(from_git FALSE)
  find_program(pacts_repo_git git)
  if(pacts_repo_git)
    execute_process(COMMAND "${pacts_repo_git}" rev-parse --show-toplevel
                    WORKING_DIRECTORY "${root}" OUTPUT_VARIABLE top
                    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0)
      get_filename_component(top "${top}" REALPATH)
      get_filename_component(root_real "${root}" REALPATH)
      if(top STREQUAL root_real)
        execute_process(COMMAND "${pacts_repo_git}" ls-files --cached --others --exclude-standard
                        WORKING_DIRECTORY "${root}" OUTPUT_VARIABLE listed RESULT_VARIABLE rc)
        if(rc EQUAL 0)
          set(from_git TRUE)
          string(REPLACE ";" "\\;" listed "${listed}")
          string(REPLACE "\n" ";" listed "${listed}")
          set(files ${listed})
        endif()
      endif()
    endif()
  endif()
  if(NOT from_git)
    file(GLOB_RECURSE files RELATIVE "${root}" "${root}/*")
    # .git and what .gitignore names: build folders and the outputs of runs.
    set(outputs "out|pacts-failures|pacts-qualify-failures|qualify-[^/]*|pacts-fuzz-out")
    string(APPEND outputs "|pacts-bench-failures|mutation-cases")
    list(FILTER files EXCLUDE REGEX "^(\\.git|build[^/]*|${outputs})/")
    list(FILTER files EXCLUDE REGEX "(^|/)\\.git/")
  endif()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

function(pacts_drop_dirs files_var dirs)
  set(kept)
  foreach(rel IN LISTS ${files_var})
    set(skip FALSE)
    foreach(dir IN LISTS dirs)
      string(FIND "${rel}" "${dir}/" at)
      if(NOT dir STREQUAL "" AND at EQUAL 0)
        set(skip TRUE)
      endif()
    endforeach()
    if(NOT skip)
      list(APPEND kept "${rel}")
    endif()
  endforeach()
  set(${files_var} ${kept} PARENT_SCOPE)
endfunction()

macro(pacts_check_args check default_exclude)
  if(NOT DEFINED SOURCE_DIR)
    message(FATAL_ERROR "${check}: -DSOURCE_DIR=DIR is required")
  endif()
  get_filename_component(root "${SOURCE_DIR}" ABSOLUTE)
  if(NOT IS_DIRECTORY "${root}")
    message(FATAL_ERROR "${check}: SOURCE_DIR ${root} is no directory")
  endif()
  if(NOT DEFINED EXCLUDE)
    set(EXCLUDE "${default_exclude}")
  endif()
  string(REPLACE "," ";" exclude_dirs "${EXCLUDE}")
endmacro()
