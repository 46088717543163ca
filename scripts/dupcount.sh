#!/usr/bin/env bash
# dupcount.sh [REPO]: the duplicate pairs of test code and of the other
# code, each counted by the `duplicates` command (the tool library's, not
# part of this repository) over a copy of just those files. Test code:
# *_test.go, *.test.ts, web/e2e/, internal/testkit/, testdata/.
#
# A Go file's imports are blanked in the copy (each line kept, so line
# numbers stay true): `duplicates` says it passes over import lines, but
# it does not know Go's `import ( ... )` block, whose lines are quoted
# paths, so two files that import much the same packages made a pair
# that no refactoring can remove. IMPORTS=keep counts them as before.
#
# MOST=N LINES_OUT=M list N pairs; KEEP=DIR keeps the copies at DIR.test
# and DIR.src.
set -euo pipefail
repo=$(cd "${1:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$repo"
git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, re, shutil, sys
tmp, keep_imports = sys.argv[1], sys.argv[2] == "keep"
test = re.compile(r"(_test\.go$|\.test\.ts$|^web/e2e/|^internal/testkit/|/testdata/)")

def blank_imports(text):
    """The Go source with its import declarations blanked, line for line."""
    out, block = [], False
    for line in text.split("\n"):
        s = line.strip()
        if block:
            block = s != ")"
            line = ""
        elif s == "import (":
            block, line = True, ""
        elif s.startswith("import "):
            line = ""
        out.append(line)
    return "\n".join(out)

for f in sys.stdin.read().split("\0"):
    if not f or not os.path.isfile(f) or os.path.islink(f):
        continue
    dst = os.path.join(tmp, "test" if test.search(f) else "src", f)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if f.endswith(".go") and not keep_imports:
        with open(f, encoding="utf-8", errors="surrogateescape") as r:
            text = r.read()
        with open(dst, "w", encoding="utf-8", errors="surrogateescape") as w:
            w.write(blank_imports(text))
    else:
        shutil.copyfile(f, dst)
' "$tmp" "${IMPORTS:-blank}"
for d in test src; do
  printf '%s: ' "$d"
  duplicates --repo "$tmp/$d" --seconds 300 --most "${MOST:-1}" | head -n "${LINES_OUT:-1}"
  if [ -n "${KEEP:-}" ]; then rm -rf "$KEEP.$d"; cp -r "$tmp/$d" "$KEEP.$d"; fi
done
