#!/bin/bash
# Adds up pacts-conformance logs of parallel seed shards per property (tools/gpu/h200_session.sh,
# tools/gpu/h200_release_check.sh): generated cases, passed, NotSupported, NotApplicable, failed,
# worst error/bound; then the cases the backend ran per KV format and per K/V layout pair, over
# every property. Each count is the number before its word on a property's line (logs without
# NotApplicable count none).
#   tools/gpu/catalogue_summary.sh LOG...   (the table on stdout, sorted by property)
cat "$@" | awk '
  /^PACTS-[A-Z]+-[0-9]+ on [^ ]+: / {
    id=$1; seen[id]=1
    for (i = 5; i <= NF; i++) {
      if ($i == "cases,") c[id] += $(i-1)
      if ($i == "passed,") p[id] += $(i-1)
      if ($i == "NotSupported,") n[id] += $(i-1)
      if ($i == "NotApplicable,") a[id] += $(i-1)
      if ($i == "error/bound") { w = $(i+1); sub(",", "", w); if (w+0 > worst[id]) worst[id] = w+0 }
    } }
  / failed on [^ ]+:/ { f[$1]++ }
  END { for (id in seen)
          printf "%-16s cases %6d  passed %6d  NotSupported %6d  NotApplicable %6d  failed %d  worst %.3f\n",
                 id, c[id], p[id], n[id], a[id], f[id], worst[id] }' | sort -V
# "  ran per kv format: bf16:3 ..." and "  ran per layout: nhd/nhd:2 ..." lines, summed.
cat "$@" | awk '
  /^  ran per kv format:/ { for (i = 5; i <= NF; i++) { split($i, kv, ":"); n["kv format " kv[1]] += kv[2] } }
  /^  ran per layout:/ { for (i = 4; i <= NF; i++) { split($i, kv, ":"); n["layout " kv[1]] += kv[2] } }
  END { for (k in n) print k, n[k] }' | sort -V | awk '
  { key = $1 == "kv" ? "ran per kv format (cases x properties):" : "ran per layout (cases x properties):"
    name = $1 == "kv" ? $3 : $2; val = $NF
    if (key != last) { if (last != "") print line; line = key; last = key }
    line = line " " name ":" val }
  END { if (last != "") print line }'
