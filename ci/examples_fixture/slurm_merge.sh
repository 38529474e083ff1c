#!/bin/bash
# Merges the shards of a slurm_array.sh campaign once every task has ended, however it ended:
#   jid=$(sbatch --parsable fuzz/examples/slurm_array.sh)
#   sbatch --dependency=afterany:$jid --export=ALL,CAMPAIGN_JOB=$jid fuzz/examples/slurm_merge.sh
# The merged directory holds summary.json, junit.xml and every distinct failure's case file;
# `pacts-fuzz replay $OUT_ROOT/merged` re-runs them.
# Exit status 3: merged, but a shard could not be added up whole (killed without a summary, a
# checkpoint, case files its summary does not name): the log and merged/summary.json name it.
#SBATCH --job-name=pacts-fuzz-merge
#SBATCH --nodes=1
#SBATCH --time=00:10:00
#SBATCH --output=pacts-fuzz-merge-%j.log
set -euo pipefail

PACTS_FUZZ=${PACTS_FUZZ:-$HOME/pacts/build/fuzz/pacts-fuzz}
: "${CAMPAIGN_JOB:?set CAMPAIGN_JOB to the ID of the array job}"
OUT_ROOT=${OUT_ROOT:-$HOME/pacts-fuzz/$CAMPAIGN_JOB}

shopt -s nullglob
shards=("$OUT_ROOT"/shard-*)
if [ ${#shards[@]} -eq 0 ]; then
  echo "no shard directories in $OUT_ROOT" >&2
  exit 2
fi
exec "$PACTS_FUZZ" merge "$OUT_ROOT/merged" "${shards[@]}"
