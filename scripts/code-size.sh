#!/usr/bin/env bash
# The figures issue 47 tracks: functions over 80 lines in src/ and apps/ (tests left out, by
# Universal Ctags' function ends), the longest files in src/, and Controller::Start's length.
# Usage: scripts/code-size.sh [max-lines, default 80]
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-80}
files=$(find src apps -name '*.cpp' -not -path '*/tests/*' | sort)
# shellcheck disable=SC2086
ctags --c++-kinds=f --fields=+neK -f - $files 2>/dev/null |
  awk -F'\t' -v max="$max" '{
    line = ""; end = "";
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6);
      if ($i ~ /^end:/) end = substr($i, 5);
    }
    scope = "";
    for (i = 4; i <= NF; i++) if ($i ~ /^(class|struct|namespace):/) scope = $i;
    sub(/^[a-z]+:/, "", scope); sub(/.*::/, "", scope);
    name = (scope != "" && scope !~ /__anon/) ? scope "::" $1 : $1;
    if (line != "" && end != "" && end - line + 1 > max) printf "%5d %s:%s %s\n", end - line + 1, $2, line, name;
  }' | sort -rn > /tmp/code-size.$$
echo "functions over $max lines: $(wc -l < /tmp/code-size.$$)"
head -80 /tmp/code-size.$$

rm -f /tmp/code-size.$$
echo "Controller::Start:"
ctags --c++-kinds=f --fields=+ne -f - src/controller/controller.cpp |
  awk -F'\t' '$3 ~ /Controller::Start\(\)/ { for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }; print "  " e - l + 1 " lines" }'
echo "files in src/ over 600 lines:"
find src -name '*.cpp' -o -name '*.h' | grep -v '/tests/' | xargs wc -l | sort -rn | awk '$2 != "total" && $1 > 600'
