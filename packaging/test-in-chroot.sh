#!/usr/bin/env bash
# The quick start's test command as a new user would run it, on a fresh Debian: makes a minimal root with
# debootstrap (once; reused when DIR exists), clones this repository's HEAD into it (committed
# work only) and runs `bash packaging/test.sh` there. Run as root on a Debian host.
#
#   bash packaging/test-in-chroot.sh bookworm|trixie [--cuda] [DIR]   (DIR: /var/tmp/npw-RELEASE-root)
#
# --cuda (trixie): `packaging/setup.sh --cuda` first (Debian's CUDA LibTorch), with the TEST-ONLY
# stand-in cuDNN (NPW_CUDNN_STUB=1) since its download is not possible everywhere: the suite then
# runs on the CPU with the CUDA LibTorch. A separate DIR is advisable (CUDA's packages replace
# the CPU LibTorch). Extra arguments after -- go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASE="${1:-}"
case "$RELEASE" in bookworm|trixie) shift ;; *) echo "usage: $0 bookworm|trixie [--cuda] [DIR] [-- CTEST_ARGS]" >&2; exit 2 ;; esac
CUDA=0
DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) CUDA=1 ;;
    --) shift; break ;;
    *) DIR="$1" ;;
  esac
  shift
done
DIR="${DIR:-/var/tmp/npw-$RELEASE$([ $CUDA = 1 ] && echo -cuda)-root}"
[ "$(id -u)" -eq 0 ] || { echo "test-in-chroot: run as root (debootstrap and chroot)" >&2; exit 2; }
source packaging/chroot-root.sh
prepare_root test-in-chroot "$RELEASE" "$DIR" --components=main,contrib

HEAD="$(git rev-parse HEAD)"
rm -rf "$DIR/root/npw"
git clone -q --no-checkout "$PWD" "$DIR/root/npw"
git -C "$DIR/root/npw" checkout -q "$HEAD"
echo "test-in-chroot: $RELEASE, commit $(git log -1 --format='%h %s' | cut -c1-80)" >&2

INNER='cd /root/npw && '
if [ $CUDA = 1 ]; then INNER+='NPW_CUDNN_STUB=1 bash packaging/setup.sh --cuda --no-build && export NPW_CUDNN_STUB=1 && '; fi
INNER+='bash packaging/test.sh "$@"'
start=$(date +%s)
rc=0
chroot "$DIR" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 bash -c "$INNER" test-in-chroot "$@" || rc=$?
echo "test-in-chroot: $RELEASE$([ $CUDA = 1 ] && echo ' (CUDA LibTorch, stand-in cuDNN)'): exit $rc after $(( $(date +%s) - start )) s" >&2
exit $rc
