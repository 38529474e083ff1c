# The link check: every text file of the tree must reference only what the repository holds.
#
#   cmake -DSOURCE_DIR=DIR [-DFILES=a.md,b/c.h] [-DEXCLUDE=dir1,dir2] [-DEXPECT=kind=N,...]
#         -P ci/link_check.cmake
#
# Scans the *.md, *.h, *.c, *.cpp, *.txt, *.sh and *.cmake files under SOURCE_DIR: the files git
# lists there (tracked, and untracked ones that are not ignored) when SOURCE_DIR is the top of a
# git work tree, else a walk of the tree without .git/, build*/ and the ignored output folders;
# FILES (comma-separated, relative to SOURCE_DIR) replaces that list. Folders in EXCLUDE (default:
# ci/link_check_fixture, the planted offences below) are skipped. Offences, one line each as
# FILE:LINE: kind: what:
#   outside  a reference into the folder `shared` beside the repository (dot, dot, slash, shared);
#   link     a Markdown link [text](target) in a .md file whose target does not exist relative to
#            the file (http(s), mailto and #anchor links are not checked; a #fragment is
#            ignored; links inside ``` fences are code, not links);
#   name     the bare name of a document kept outside the repository (a path such as
#            docs/architecture.md names a file of the repository and is not an offence);
#   issue    a tracker number ("issue" followed by a number): the product says what a thing is,
#            not which ticket made it.
# Exit status: without EXPECT, 0 when there is no offence; with EXPECT (the counts per kind in
# this order: outside=N,link=N,name=N,issue=N), 0 when the offences are exactly those.
# A list of no file is an error: a check that reads nothing cannot fail.
cmake_minimum_required(VERSION 3.25)

include("${CMAKE_CURRENT_LIST_DIR}/repo_files.cmake")
pacts_check_args("link check" "ci/link_check_fixture")

set(text_suffix "\\.(md|h|c|cpp|txt|sh|cmake)$")
# The documents that live outside the repository, by the names they were cited with. Written
# with a bracket in each, so that this file does not match itself.
set(outside_names
    "seeds[.]md|architecture[.]md|conventions[.]md|h200[-]peers|perf[-]analysis|aiter[-]pa-decode"
    "|formats[-]and-conformance|field[-]bugs|toolchains[.]md")
string(JOIN "" outside_names ${outside_names})
set(re_outside "[.][.]/shared")
set(outside_dir "..")
string(APPEND outside_dir "/shared")
set(re_name "(^|[^/A-Za-z0-9_.-])(${outside_names})")
set(re_issue "(^|[^A-Za-z])([Ii][Ss][Ss][Uu][Ee][Ss]? +[0-9]+)")
set(re_link "\\]\\(([^)]*)\\)")

# ---- The file list -----------------------------------------------------------------------------
if(DEFINED FILES)
  string(REPLACE "," ";" files "${FILES}")
else()
  pacts_repo_files("${root}" files)
endif()
list(FILTER files INCLUDE REGEX "${text_suffix}")
pacts_drop_dirs(files "${exclude_dirs}")
list(REMOVE_DUPLICATES files)
list(SORT files)

# ---- The scan ----------------------------------------------------------------------------------
string(ASCII 1 c_bs)
string(ASCII 2 c_sc)
string(ASCII 3 c_lb)
string(ASCII 4 c_rb)
set(count 0)
set(scanned 0)
foreach(kind outside link name issue)
  set(count_${kind} 0)
endforeach()

macro(offence kind file line what)
  message("${file}:${line}: ${kind}: ${what}")
  math(EXPR count "${count} + 1")
  math(EXPR count_${kind} "${count_${kind}} + 1")
endmacro()

foreach(rel IN LISTS files)
  set(path "${root}/${rel}")
  if(IS_DIRECTORY "${path}" OR NOT EXISTS "${path}")
    continue()
  endif()
  math(EXPR scanned "${scanned} + 1")
  file(READ "${path}" content)
  set(is_md FALSE)
  if(rel MATCHES "\\.md$")
    set(is_md TRUE)
  endif()
  # Most files hold no candidate at all: only those are read line by line.
  set(candidate FALSE)
  if(content MATCHES "${re_outside}" OR content MATCHES "${re_name}" OR
     content MATCHES "${re_issue}")
    set(candidate TRUE)
  elseif(is_md AND content MATCHES "\\]\\(")
    set(candidate TRUE)
  endif()
  if(NOT candidate)
    continue()
  endif()
  get_filename_component(dir "${path}" DIRECTORY)
  # One list element per line: the characters a CMake list treats specially are replaced by
  # control characters first, and put back per line.
  string(REPLACE "\\" "${c_bs}" content "${content}")
  string(REPLACE ";" "${c_sc}" content "${content}")
  string(REPLACE "[" "${c_lb}" content "${content}")
  string(REPLACE "]" "${c_rb}" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  set(number 0)
  set(in_fence FALSE)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    string(REPLACE "${c_sc}" ";" line "${line}")
    string(REPLACE "${c_lb}" "[" line "${line}")
    string(REPLACE "${c_rb}" "]" line "${line}")
    string(REPLACE "${c_bs}" "\\" line "${line}")
    if(line MATCHES "${re_outside}")
      offence(outside "${rel}" ${number} "reference to ${outside_dir}, outside the repository")
    endif()
    if(line MATCHES "${re_issue}")
      offence(issue "${rel}" ${number} "tracker number (\"${CMAKE_MATCH_2}\")")
    endif()
    if(is_md AND line MATCHES "^[ \t]*```")
      if(in_fence)
        set(in_fence FALSE)
      else()
        set(in_fence TRUE)
      endif()
      continue()
    endif()
    if(is_md AND NOT in_fence)
      set(rest "${line}")
      while(rest MATCHES "${re_link}")
        set(target "${CMAKE_MATCH_1}")
        string(FIND "${rest}" "${CMAKE_MATCH_0}" at)
        string(LENGTH "${CMAKE_MATCH_0}" len)
        math(EXPR at "${at} + ${len}")
        string(SUBSTRING "${rest}" ${at} -1 rest)
        string(STRIP "${target}" target)
        string(REGEX REPLACE "^<(.*)>$" "\\1" target "${target}")
        string(REGEX REPLACE "[ \t].*$" "" target "${target}")   # a link title
        if(target STREQUAL "" OR target MATCHES "^(https?:|mailto:|#)")
          continue()
        endif()
        string(REGEX REPLACE "#.*$" "" file_part "${target}")
        if(file_part MATCHES "^/")
          set(resolved "${root}${file_part}")
        else()
          set(resolved "${dir}/${file_part}")
        endif()
        if(NOT EXISTS "${resolved}")
          offence(link "${rel}" ${number} "link target ${target} does not exist")
        endif()
      endwhile()
    endif()
    # A link's target was checked above; a bare name is one outside a path and outside a target.
    string(REGEX REPLACE "\\]\\([^)]*\\)" "]" prose "${line}")
    if(prose MATCHES "${re_name}")
      offence(name "${rel}" ${number} "${CMAKE_MATCH_2}: a document outside the repository")
    endif()
  endforeach()
endforeach()

set(summary "outside=${count_outside},link=${count_link},name=${count_name},issue=${count_issue}")
message("link check: ${scanned} files scanned under ${root}, ${count} offences (${summary})")
if(scanned EQUAL 0)
  message(FATAL_ERROR "link check: no file to scan: a check that reads nothing cannot fail")
endif()
if(DEFINED EXPECT)
  if(NOT summary STREQUAL EXPECT)
    message(FATAL_ERROR "link check: expected offences ${EXPECT}, found ${summary}")
  endif()
  message("link check: the planted offences were found, as expected")
elseif(count GREATER 0)
  message(FATAL_ERROR "link check: ${count} offences")
endif()
