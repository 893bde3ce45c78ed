#!/usr/bin/env bash
# Checks that every #include "X/..." in src/<component>/ names a component that
# src/DEPENDENCIES allows. Prints each violation; exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed
while IFS=: read -r comp deps; do
  [[ -z "$comp" || "$comp" == \#* ]] && continue
  allowed[$comp]="$comp $deps"
done < src/DEPENDENCIES
bad=0
for dir in src/*/; do
  comp=$(basename "$dir")
  if [[ -z "${allowed[$comp]+x}" ]]; then
    echo "src/$comp is not listed in src/DEPENDENCIES"; bad=1; continue
  fi
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([^/"]+)\/.*/\1/' <<<"$line")
    [[ " ${allowed[$comp]} " == *" $inc "* ]] || { echo "$file includes $inc/, which $comp may not use"; bad=1; }
  done < <(grep -rHE '^#include "[a-z_]+/' "$dir" || true)
done
if [[ $bad == 0 ]]; then echo "dependency directions: ok"; fi
exit $bad
