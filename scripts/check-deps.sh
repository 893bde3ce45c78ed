#!/usr/bin/env bash
# Checks the #include "X/..." edges of src/<component>/ and apps/<app>/ against
# src/DEPENDENCIES, both ways: an include of a component not listed is a violation, and so is a
# listed component that nothing includes (the list says exactly which edges exist, so a new
# edge cannot pass unseen). A component's tests (src/<c>/tests/) may also include the shared
# test support (tests/support/). Prints each problem; exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed
while IFS=: read -r comp deps; do
  [[ -z "$comp" || "$comp" == \#* ]] && continue
  allowed[$comp]="$(echo $deps)"
done < src/DEPENDENCIES
bad=0
check() {  # check NAME DIR [SELF]: SELF is how its own files are included ("apps" for apps/)
  local comp=$1 dir=$2 self=${3:-$1}
  if [[ -z "${allowed[$comp]+x}" ]]; then
    echo "$dir is not listed in src/DEPENDENCIES"; bad=1; return
  fi
  declare -A used=()
  while IFS= read -r line; do
    local file=${line%%:*}
    local inc
    inc=$(sed -E 's/.*#include "([^/"]+)\/.*/\1/' <<<"$line")
    [[ "$inc" == "$self" ]] && continue
    if [[ "$inc" == tests && "$file" == */tests/* ]] && grep -q '#include "tests/support/' <<<"$line"; then
      continue
    fi
    used[$inc]=1
    [[ " ${allowed[$comp]} " == *" $inc "* ]] || { echo "$file includes $inc/, which $comp may not use"; bad=1; }
  done < <(grep -rHE '^#include "[a-z_]+/' "$dir" || true)
  for dep in ${allowed[$comp]}; do
    [[ -n "${used[$dep]+x}" ]] || { echo "src/DEPENDENCIES lets $comp use $dep, which it does not include: remove it"; bad=1; }
  done
}
for dir in src/*/; do check "$(basename "$dir")" "$dir"; done
for dir in apps/*/; do check "$(basename "$dir")" "$dir" apps; done
if [[ $bad == 0 ]]; then echo "dependency directions: ok"; fi
exit $bad
