#!/usr/bin/env bash
# check-glibc.sh BINARY VERSION: fails when BINARY needs a glibc symbol version newer than
# VERSION (e.g. 2.31), naming the symbols; the portable agent's build runs it after each link.
set -euo pipefail
bin=$1 max=$2
newer=$(objdump -T "$bin" | sed -n 's/.*[( ]GLIBC_\([0-9.]*\))\{0,1\}  *\([^ ]*\)$/\1 \2/p' |
  while read -r v sym; do
    if [ "$(printf '%s\n%s\n' "$v" "$max" | sort -V | tail -1)" != "$max" ]; then
      echo "$sym (GLIBC_$v)"
    fi
  done)
if [ -n "$newer" ]; then
  echo "error: $bin needs glibc newer than $max:" >&2
  echo "$newer" | sort -u | head -20 >&2
  exit 1
fi
echo "$bin: glibc $(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1) at most (limit $max)"
