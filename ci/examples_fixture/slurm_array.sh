#!/bin/bash
# A planted fixture (ci/examples_check.cmake): no --requeue, as the first version of this example.
# A pacts-fuzz campaign as a Slurm job array: one node per array task, every GPU of the node, one
# shard per task (fuzz/README.md, "Sharding across machines"). Submit with
#   sbatch fuzz/examples/slurm_array.sh
# and merge the shards afterwards with fuzz/examples/slurm_merge.sh (it prints the command).
#
# Adjust the partition, GPUs per node and paths to your cluster. The array size is the shard
# count: every task reads it from SLURM_ARRAY_TASK_COUNT, so change it in one place only.
#SBATCH --job-name=pacts-fuzz
#SBATCH --array=0-7
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --gpus-per-node=8
#SBATCH --time=10:30:00
# SIGTERM to pacts-fuzz (exec'd below, so it is the batch step's process) 5 minutes before the
# time limit: it stops cleanly and writes its summary before Slurm's SIGKILL.
#SBATCH --signal=B:TERM@300
#SBATCH --output=pacts-fuzz-%A_%a.log
# A task whose node is preempted or fails is put back in the queue (where the cluster's
# preemption mode requeues) and runs again with the same seed and shard on the same --out: the
# first run's files move into previous-*/ there, and the merge counts the retry's (fuzz/README.md).
#SBATCH --open-mode=append
set -euo pipefail

PACTS_FUZZ=${PACTS_FUZZ:-$HOME/pacts/build/fuzz/pacts-fuzz}   # a -DPACTS_ENABLE_CUDA=ON build
# Every shard of a campaign must share the seed and the shard count: the array job's ID is a
# fresh seed per campaign that every task sees. Set CAMPAIGN_SEED to repeat a campaign.
CAMPAIGN_SEED=${CAMPAIGN_SEED:-$SLURM_ARRAY_JOB_ID}
OUT_ROOT=${OUT_ROOT:-$HOME/pacts-fuzz/$SLURM_ARRAY_JOB_ID}
BUDGET_S=${BUDGET_S:-36000}   # 10 hours of cases; the time limit above leaves room to finish

mkdir -p "$OUT_ROOT"
# Exit status 1 means failures were found (case files in shard-K/failures): the task shows as
# FAILED in sacct, which is what an engineer looking at the array in the morning wants to see.
exec "$PACTS_FUZZ" run \
  --seed "$CAMPAIGN_SEED" \
  --shard "${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}" \
  --seconds "$BUDGET_S" \
  --out "$OUT_ROOT/shard-${SLURM_ARRAY_TASK_ID}" \
  --progress --progress-interval 60
