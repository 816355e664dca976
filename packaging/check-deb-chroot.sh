#!/usr/bin/env bash
# The .deb as a new user gets it, on a fresh Debian: makes a minimal root with debootstrap (once;
# reused when CHROOT exists), installs the package there with apt (which resolves Qt, LibTorch
# and the rest from Debian), and checks the installed layout (Debian's policy: /usr, stripped
# binaries, the man page, the desktop entry and its icon, the manual), then runs what a user runs
# first: npw --help, man npw, npw demo (the installed demo models, not a build tree's) and
# npw-studio's screenshot demo under xvfb-run. Not run in CI: minutes of downloads.
#
#   sudo bash packaging/check-deb-chroot.sh build/npw_VERSION_ARCH.deb CHROOT [RELEASE]
#
# RELEASE: bookworm (default; the package's shlibdeps are those of the Debian it was built on).
# The studio's screenshot is copied to CHROOT.png beside CHROOT. The chroot is left in place for
# a rerun; remove it with `rm -rf CHROOT` (it is about 1.5 GB once the dependencies are in).
set -euo pipefail
DEB="${1:-}"
ROOT="${2:-}"
RELEASE="${3:-bookworm}"
if [ -z "$DEB" ] || [ -z "$ROOT" ] || [ ! -f "$DEB" ]; then
  echo "usage: $0 NPW.deb CHROOT [RELEASE]" >&2
  exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "check-deb-chroot: run as root (debootstrap, mount and chroot)" >&2; exit 2; }
DEB="$(realpath "$DEB")"
ROOT="$(realpath -m "$ROOT")"
source "$(dirname "$0")/chroot-root.sh"
prepare_root check-deb-chroot "$RELEASE" "$ROOT"
cp "$DEB" "$ROOT/tmp/"
PKG="/tmp/$(basename "$DEB")"

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
step() { echo; echo "== $*" >&2; }
fail() { echo "check-deb-chroot: FAILED: $*" >&2; exit 1; }

step "apt-get install $PKG (and man-db, xvfb for the checks)"
in_root apt-get update -q
# man-db first, so that the package's man page is indexed when npw is installed.
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends man-db xvfb xauth
start=$(date +%s)
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PKG"
echo "installed in $(( $(date +%s) - start )) s; $(in_root du -sh /usr | cut -f1) under /usr with its dependencies" >&2

step "the layout (Debian's policy)"
for f in /usr/bin/npw /usr/bin/npw-studio /usr/libexec/npw/npw-run /usr/libexec/npw/npw-text \
         /usr/share/man/man1/npw.1.gz /usr/share/man/man1/npw-studio.1.gz /usr/share/applications/npw-studio.desktop \
         /usr/share/icons/hicolor/scalable/apps/npw-studio.svg /usr/share/npw/demo/lm/config.json; do
  [ -e "$ROOT$f" ] || fail "$f is missing"
done
[ -d "$ROOT/usr/share/npw/manual" ] || echo "note: no /usr/share/npw/manual (resources/manual absent when the package was built)" >&2
if in_root dpkg -L npw | grep -q '^/usr/local'; then fail "files under /usr/local"; fi
grep -q '^Icon=npw-studio$' "$ROOT/usr/share/applications/npw-studio.desktop" || fail "the desktop entry names another icon"
# Stripped: no .debug_* sections left in the installed programs (host's readelf on the chroot's files).
for f in /usr/bin/npw /usr/bin/npw-studio /usr/libexec/npw/npw-run /usr/libexec/npw/npw-text; do
  if readelf -S "$ROOT$f" | grep -q '\.debug_'; then fail "$f is not stripped"; fi
done
gzip -t "$ROOT/usr/share/man/man1/npw.1.gz"
echo "layout ok: /usr only, stripped, man page, desktop entry, icon" >&2

step "npw --help, npw --version, npw demo --help, npw help prune"
# (chroot starts in its own /: nothing of a source or build tree is in reach)
in_root npw --help
in_root npw --version
in_root npw demo --help
in_root npw help prune | head -5

step "man npw"
in_root env MANPAGER=cat MANWIDTH=100 man npw | head -40
in_root env MANPAGER=cat man npw-studio | head -3  # a .so link to npw(1)
in_root env MANPAGER=cat man -l /usr/share/man/man1/npw.1.gz 2>&1 >/dev/null | grep -i warn && fail "man -l warns" || true

step "npw info demo:lm (the installed demo model)"
info=$(in_root npw info demo:lm --json)
echo "$info" | head -c 600; echo
echo "$info" | grep -q '/usr/share/npw/demo/lm' || fail "demo:lm did not resolve to /usr/share/npw/demo/lm"

step "npw demo (language models; the image model skipped: minutes on a small machine)"
start=$(date +%s)
in_root bash -c 'cd /tmp && rm -rf npw-demo && npw demo --out /tmp/npw-demo --image-samples 0'
echo "npw demo: $(( $(date +%s) - start )) s" >&2
[ -s "$ROOT/tmp/npw-demo/results.json" ] || fail "npw demo wrote no results.json"
grep -q '/usr/share/npw/demo' "$ROOT/tmp/npw-demo/results.json" || echo "note: results.json names no /usr/share/npw path" >&2

step "npw-studio --demo scores --screenshot (xvfb-run)"
start=$(date +%s)
in_root bash -c 'cd /tmp && rm -f studio.png && xvfb-run -a -s "-screen 0 1600x1000x24" npw-studio --demo scores --screenshot /tmp/studio.png'
[ -s "$ROOT/tmp/studio.png" ] || fail "npw-studio wrote no screenshot"
cp "$ROOT/tmp/studio.png" "$ROOT.png"
echo "npw-studio screenshot: $ROOT.png ($(stat -c %s "$ROOT.png") bytes, $(( $(date +%s) - start )) s)" >&2

step "check-deb-chroot: $(basename "$DEB") on $RELEASE: all checks passed"
