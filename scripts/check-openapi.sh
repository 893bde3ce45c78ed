#!/usr/bin/env bash
# Checks that every route the API registers (router.Add and router.AddSlow in src/api/routes/)
# is described in docs/openapi.yaml with its method. Prints each one missing; exits 1
# if there is any. Runs as the `openapi_check` test.
set -euo pipefail
cd "$(dirname "$0")/.."
# "METHOD PATH" for each documented operation.
documented=$(awk '
  /^  \/[^ ]*:$/ { path = $1; sub(/:$/, "", path) }
  /^    (get|post|put|delete|patch):$/ { m = $1; sub(/:$/, "", m); print toupper(m) " " path }
' docs/openapi.yaml)
bad=0
while IFS= read -r route; do
  [[ -z "$route" ]] && continue
  if ! grep -qxF "$route" <<<"$documented"; then
    echo "docs/openapi.yaml does not describe $route"
    bad=1
  fi
done < <(cat src/api/routes/*.cpp | tr '\n' ' ' |
           grep -oE 'router\.Add(Slow)?\(\s*"[A-Z]+",\s*"[^"]+"' |
           sed -E 's/router\.Add(Slow)?\(\s*"([A-Z]+)",\s*"([^"]+)"/\2 \3/' | sort -u)
[[ $bad == 0 ]] && echo "every route is in docs/openapi.yaml"
exit $bad
