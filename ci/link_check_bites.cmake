# The planted-offences test of ci/link_check.cmake: copies ci/link_check_fixture (FIXTURE) to
# WORK_DIR, writes into the copy the two offences the repository itself may not hold (a tracker
# number and a path into the folder beside the repository, assembled here from pieces so that
# this file holds neither), then runs the check on the copy with EXPECT.
#   cmake -DFIXTURE=DIR -DWORK_DIR=DIR -DEXPECT=outside=1,... -P ci/link_check_bites.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(COPY "${FIXTURE}/" DESTINATION "${WORK_DIR}")
set(dots "..")
file(APPEND "${WORK_DIR}/page.md" "\nThe planted outside reference: the facts are in ${dots}/sha" "red/notes.\n")
file(APPEND "${WORK_DIR}/code.cpp" "// The planted tracker number: iss" "ue 42.\n")
# A type the check does not scan holds both, and must not count.
file(WRITE "${WORK_DIR}/data.json" "{\"note\": \"not a scanned type: iss" "ue 7, ${dots}/sha" "red, see" "ds.md\"}\n")
set(SOURCE_DIR "${WORK_DIR}")
include("${CMAKE_CURRENT_LIST_DIR}/link_check.cmake")
