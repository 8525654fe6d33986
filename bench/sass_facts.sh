#!/usr/bin/env bash
# sass_facts.sh LIB - per forward kernel in LIB: registers, stack (spills), shared memory,
# and the instruction facts that matter (HMMA present, LDSM, local-memory LDL/STL),
# read from the machine code with cuobjdump. Prints a markdown table.
set -euo pipefail
lib=$1
echo "| kernel | regs | stack B | HMMA | LDSM | LDL+STL |"
echo "|---|---|---|---|---|---|"
cuobjdump -res-usage "$lib" 2>/dev/null | awk '
  /Function fa_fwd/ { name=$2; sub(":$","",name) }
  /REG:/ && name { match($0,/REG:[0-9]+/); r=substr($0,RSTART+4,RLENGTH-4);
                   match($0,/STACK:[0-9]+/); st=substr($0,RSTART+6,RLENGTH-6);
                   print name, r, st; name="" }' | sort -u > /tmp/res.txt
cuobjdump -sass "$lib" 2>/dev/null | awk '
  /Function : fa_fwd/ { name=$3 }
  name && /HMMA/ { h[name]++ } name && /LDSM/ { l[name]++ } name && /(LDL|STL)/ { s[name]++ }
  END { for (n in h) print n, h[n]+0, l[n]+0, s[n]+0 }' | sort -u > /tmp/sass.txt
join /tmp/res.txt /tmp/sass.txt | awk '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }'
