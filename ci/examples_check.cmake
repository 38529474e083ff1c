# The fuzz campaign examples (fuzz/examples/) hold what fuzz/README.md says of them (ctest
# pacts_fuzz_examples_check):
#   - k8s_indexed_job.yaml is a batch/v1 Job in Indexed completion mode whose completions equal
#     its SHARDS and its parallelism, whose pods write --out /results/$CAMPAIGN_SEED/shard-K, and
#     whose merge command (in the header) reads exactly those folders for the seed it sets;
#   - slurm_array.sh requeues a preempted task, takes the shard from the array, and writes the
#     folders slurm_merge.sh merges;
#   - both shell scripts pass shellcheck (when it is installed; otherwise that part is reported
#     as skipped in the log).
#   cmake -DSOURCE_DIR=... -P ci/examples_check.cmake
#   cmake -DSOURCE_DIR=... -DPLANT=WORK_DIR -P ci/examples_check.cmake
# With PLANT, the check runs on copies of the examples written into WORK_DIR with the faults of
# their first versions planted (the Job's merge reading /results/shard-*, no --requeue): ctest
# pacts_fuzz_examples_check_bites passes only when both are reported.
set(EXAMPLES ${SOURCE_DIR}/fuzz/examples)
if(PLANT)
  file(MAKE_DIRECTORY ${PLANT})
  file(READ ${EXAMPLES}/k8s_indexed_job.yaml text)
  string(REGEX REPLACE "pacts-fuzz merge /results/[0-9]+/merged /results/[0-9]+/shard-\\*"
         "pacts-fuzz merge /results/merged /results/shard-*" text "${text}")
  file(WRITE ${PLANT}/k8s_indexed_job.yaml "${text}")
  file(READ ${EXAMPLES}/slurm_array.sh text)
  string(REPLACE "#SBATCH --requeue\n" "" text "${text}")
  file(WRITE ${PLANT}/slurm_array.sh "${text}")
  file(COPY ${EXAMPLES}/slurm_merge.sh DESTINATION ${PLANT})
  set(EXAMPLES ${PLANT})
endif()
set(problems "")
# `needle` (a literal string) must occur in the file's text. A function, not a macro: the texts
# hold ${...} that must not be evaluated again.
function(expect_literal text needle what)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    set(problems "${problems}  ${what}\n" PARENT_SCOPE)
  endif()
endfunction()
function(expect_regex text regex what)
  if(NOT text MATCHES "${regex}")
    set(problems "${problems}  ${what}\n" PARENT_SCOPE)
  endif()
endfunction()

file(READ ${EXAMPLES}/k8s_indexed_job.yaml job)
expect_literal("${job}" [=[
apiVersion: batch/v1
]=] "k8s_indexed_job.yaml: not apiVersion batch/v1")
expect_literal("${job}" [=[
kind: Job
]=] "k8s_indexed_job.yaml: not kind Job")
expect_literal("${job}" [=[
  completionMode: Indexed
]=] "k8s_indexed_job.yaml: completionMode is not Indexed")
string(REGEX MATCH "\n  completions: ([0-9]+)\n" _ "${job}")
set(completions "${CMAKE_MATCH_1}")
string(REGEX MATCH "\n  parallelism: ([0-9]+)\n" _ "${job}")
set(parallelism "${CMAKE_MATCH_1}")
string(REGEX MATCH "name: SHARDS\n *value: \"([0-9]+)\"" _ "${job}")
set(shards "${CMAKE_MATCH_1}")
if(completions STREQUAL "" OR NOT completions STREQUAL shards OR NOT parallelism STREQUAL shards)
  string(APPEND problems "  k8s_indexed_job.yaml: completions '${completions}', parallelism '${parallelism}' and SHARDS '${shards}' differ\n")
endif()
string(REGEX MATCH "name: CAMPAIGN_SEED[^\n]*\n *value: \"([0-9]+)\"" _ "${job}")
set(seed "${CMAKE_MATCH_1}")
expect_literal("${job}" [=[--shard "$JOB_COMPLETION_INDEX/$SHARDS"]=] "k8s_indexed_job.yaml: the shard is not JOB_COMPLETION_INDEX/SHARDS")
expect_literal("${job}" [=[--out "/results/$CAMPAIGN_SEED/shard-$JOB_COMPLETION_INDEX"]=] "k8s_indexed_job.yaml: the pods do not write /results/CAMPAIGN_SEED/shard-K")
# The merge command of the header names the same folders, for the seed the Job sets.
string(REGEX MATCH "#   pacts-fuzz merge ([^ \n]+) ([^ \n]+)\n" _ "${job}")
set(merged "${CMAKE_MATCH_1}")
set(inputs "${CMAKE_MATCH_2}")
if(NOT inputs STREQUAL "/results/${seed}/shard-*" OR NOT merged STREQUAL "/results/${seed}/merged")
  string(APPEND problems "  k8s_indexed_job.yaml: the merge command reads '${inputs}' into '${merged}'; the pods write /results/${seed}/shard-K\n")
endif()

file(READ ${EXAMPLES}/slurm_array.sh array)
file(READ ${EXAMPLES}/slurm_merge.sh merge)
expect_literal("${array}" [=[
#SBATCH --requeue
]=] "slurm_array.sh: no #SBATCH --requeue (a preempted task is not retried)")
expect_regex("${array}" "\n#SBATCH --array=[0-9]+-[0-9]+\n" "slurm_array.sh: no #SBATCH --array")
expect_literal("${array}" [=[--shard "${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}"]=] "slurm_array.sh: the shard is not the array task")
expect_literal("${array}" [=[--out "$OUT_ROOT/shard-${SLURM_ARRAY_TASK_ID}"]=] "slurm_array.sh: the tasks do not write OUT_ROOT/shard-K")
expect_literal("${array}" [=[OUT_ROOT=${OUT_ROOT:-$HOME/pacts-fuzz/$SLURM_ARRAY_JOB_ID}]=] "slurm_array.sh: OUT_ROOT is not per array job")
expect_literal("${merge}" [=[OUT_ROOT=${OUT_ROOT:-$HOME/pacts-fuzz/$CAMPAIGN_JOB}]=] "slurm_merge.sh: OUT_ROOT is not the array job's")
expect_literal("${merge}" [=[shards=("$OUT_ROOT"/shard-*)]=] "slurm_merge.sh: does not merge OUT_ROOT/shard-*")

find_program(SHELLCHECK shellcheck)
if(SHELLCHECK)
  execute_process(COMMAND ${SHELLCHECK} ${EXAMPLES}/slurm_array.sh ${EXAMPLES}/slurm_merge.sh
                  OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(APPEND problems "  shellcheck:\n${out}\n")
  endif()
else()
  message(STATUS "shellcheck not installed: the scripts' lint skipped")
endif()

if(problems)
  message(FATAL_ERROR "fuzz/examples do not hold what fuzz/README.md says:\n${problems}")
endif()
message(STATUS "fuzz/examples: the Indexed Job (${shards} shards, merge of /results/${seed}/shard-*) and the Slurm array hold")
