# A minimal Debian root for the chroot checks (sourced by test-in-chroot.sh and
# check-deb-chroot.sh): made with debootstrap once and reused when it exists, /proc, /sys and
# /dev bind-mounted for the run (unmounted when the calling script exits), the host's DNS.
#   prepare_root WHO RELEASE DIR [debootstrap options...]
prepare_root() {
  local who="$1" release="$2" dir="$3"
  shift 3
  command -v debootstrap >/dev/null || apt-get install -y --no-install-recommends debootstrap
  if [ ! -x "$dir/bin/bash" ]; then
    echo "$who: debootstrap $release into $dir" >&2
    debootstrap --variant=minbase "$@" "$release" "$dir" http://deb.debian.org/debian
  fi
  CHROOT_MOUNTED=()
  trap 'for ((i = ${#CHROOT_MOUNTED[@]} - 1; i >= 0; i--)); do umount "${CHROOT_MOUNTED[$i]}" || true; done' EXIT
  local m
  for m in proc sys dev dev/pts; do
    if ! mountpoint -q "$dir/$m"; then mount --bind "/$m" "$dir/$m"; CHROOT_MOUNTED+=("$dir/$m"); fi
  done
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
}
