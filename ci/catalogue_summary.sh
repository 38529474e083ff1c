#!/bin/bash
# Adds up pacts-conformance logs of parallel seed shards per property (ci/h200_session.sh,
# ci/h200_release_check.sh): generated cases, passed, NotSupported, failed, worst error/bound.
#   ci/catalogue_summary.sh LOG...   (the table on stdout, sorted by property)
cat "$@" | awk '
  /^PACTS-[A-Z]+-[0-9]+ on [^ ]+: / {
    id=$1; c[id]+=$4; p[id]+=$6; n[id]+=$8; w=$12; sub(",", "", w); if (w+0 > worst[id]) worst[id]=w+0 }
  / failed on [^ ]+:/ { f[$1]++ }
  END { for (id in c) printf "%-16s cases %6d  passed %6d  NotSupported %6d  failed %d  worst %.3f\n",
        id, c[id], p[id], n[id], f[id], worst[id] }' | sort -V
