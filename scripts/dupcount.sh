#!/usr/bin/env bash
# dupcount.sh [REPO]: the duplicate pairs of test code and of the other
# code, each counted by the `duplicates` command (the tool library's, not
# part of this repository) over a copy of just those files. Test code:
# *_test.go, *.test.ts, web/e2e/, internal/testkit/, testdata/.
# MOST=N LINES_OUT=M list N pairs; KEEP=DIR keeps the copies at DIR.test
# and DIR.src.
set -euo pipefail
repo=$(cd "${1:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$repo"
git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, re, shutil, sys
tmp = sys.argv[1]
test = re.compile(r"(_test\.go$|\.test\.ts$|^web/e2e/|^internal/testkit/|/testdata/)")
for f in sys.stdin.read().split("\0"):
    if not f or not os.path.isfile(f) or os.path.islink(f):
        continue
    dst = os.path.join(tmp, "test" if test.search(f) else "src", f)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(f, dst)
' "$tmp"
for d in test src; do
  printf '%s: ' "$d"
  duplicates --repo "$tmp/$d" --seconds 300 --most "${MOST:-1}" | head -n "${LINES_OUT:-1}"
  if [ -n "${KEEP:-}" ]; then rm -rf "$KEEP.$d"; cp -r "$tmp/$d" "$KEEP.$d"; fi
done
