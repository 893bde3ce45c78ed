#!/usr/bin/env bash
# Fails if any C++ file differs from what clang-format (.clang-format) would write.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=${1:-clang-format}
git ls-files 'src/*.cpp' 'src/*.h' 'apps/*.cpp' 'apps/*.h' 'tests/*.cpp' 'tests/*.h' 'bench/*.cpp' \
  | xargs "$fmt" --dry-run -Werror
echo "formatting: ok"
