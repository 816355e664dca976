#!/usr/bin/env bash
# Makes this checkout small enough to be sent to a lent GPU machine, and back again.
#
# The GPU check (packaging/gpu-check.sh) needs core, app, cmake, packaging and tests/fixtures,
# about 6 MB, plus the carried dependency prefix (build-gpu-deps, 11 MB). The tracked tree is
# ~86 MB, nearly all of it test data and the demo models (tests/data, tests/fuzz,
# resources/demo), over the 64 MiB that such a machine accepts. `slim` takes those folders out of
# git's index (the files stay on disk, untouched) and ignores them in .git/info/exclude, so that
# neither "tracked" nor "untracked" lists them; `restore` puts both back exactly.
#
#   bash packaging/gpu-tree.sh slim      before the GPU calls
#   bash packaging/gpu-tree.sh restore   right after them, before any commit
#   bash packaging/gpu-tree.sh status    which state the checkout is in, and what would travel
#
# While slim, `git status` shows those folders as deleted from the index: never commit then.
set -euo pipefail
cd "$(dirname "$0")/.."
HEAVY=(resources/demo tests/data tests/fuzz)
EXCLUDE="$(git rev-parse --git-path info/exclude)"
MARK="# npw gpu-tree slim (packaging/gpu-tree.sh restore removes these lines)"

travelling_bytes() {
  { git ls-files -z; git ls-files -z --others --exclude-standard; } |
    xargs -0 -r stat -c %s 2>/dev/null | awk '{ s += $1 } END { printf "%.1f MiB\n", s / 1048576 }'
}
is_slim() { grep -qxF "$MARK" "$EXCLUDE" 2>/dev/null; }

case "${1:-}" in
  slim)
    if is_slim; then echo "gpu-tree: already slim"; exit 0; fi
    if ! git diff --cached --quiet; then
      echo "gpu-tree: the index has staged changes; commit or unstage them first (restore must put back exactly what was there)" >&2
      exit 1
    fi
    mkdir -p "$(dirname "$EXCLUDE")"
    { echo "$MARK"; for d in "${HEAVY[@]}"; do echo "/$d/"; done; } >>"$EXCLUDE"
    git rm -r -q --cached -- "${HEAVY[@]}"
    echo "gpu-tree: slim; would travel: $(travelling_bytes) (+ what the call carries). Run 'restore' after the GPU calls."
    ;;
  restore)
    if ! is_slim; then echo "gpu-tree: not slim; nothing to restore"; exit 0; fi
    git reset -q -- "${HEAVY[@]}"
    tmp="$(mktemp)"
    awk -v mark="$MARK" -v dirs="${HEAVY[*]}" '
      BEGIN { n = split(dirs, d, " "); for (i = 1; i <= n; i++) drop["/" d[i] "/"] = 1 }
      $0 == mark { skipping = 1; next }
      skipping && ($0 in drop) { next }
      { skipping = 0; print }' "$EXCLUDE" >"$tmp"
    cat "$tmp" >"$EXCLUDE" && rm -f "$tmp"
    echo "gpu-tree: restored; git status is as before"
    ;;
  status)
    if is_slim; then echo "gpu-tree: slim"; else echo "gpu-tree: full"; fi
    echo "gpu-tree: would travel: $(travelling_bytes)"
    ;;
  *)
    echo "usage: $0 slim|restore|status" >&2
    exit 2
    ;;
esac
