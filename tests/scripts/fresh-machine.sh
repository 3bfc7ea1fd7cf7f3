#!/bin/sh
# Run the README's two commands (make demo, make check) as root in a
# minimal Debian 12 (debootstrap --variant=minbase, plus gcc and make), the
# way a bare container would: nothing else installed, packages from the
# Debian archive only. Not run by `make check` (it needs root, network
# access to the archive and about 20 minutes).
#
#   sudo tests/scripts/fresh-machine.sh [CHROOT_DIR]     (default /var/tmp/hbg-minbase)
#
# The chroot is created on first use and reused; the source tree is copied
# in fresh each run (committed files only: `git ls-files`). Exit status:
# that of the first command that failed.
set -eu

root=${1:-/var/tmp/hbg-minbase}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
src=$(cd "$(dirname "$0")/../.." && pwd)

[ "$(id -u)" = 0 ] || { echo "fresh-machine: run as root" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-machine: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }

if [ ! -x "$root/usr/bin/apt-get" ]; then
        echo "fresh-machine: debootstrap --variant=minbase bookworm $root"
        debootstrap --variant=minbase bookworm "$root" "$mirror"
fi

mounted=""
cleanup() {
        for m in $mounted; do umount -l "$root$m" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
for m in /proc /sys /dev /dev/pts; do
        mkdir -p "$root$m"
        mount --bind "$m" "$root$m"
        mounted="$m $mounted"
done
mkdir -p "$root/tmp" "$root/run"
mount -t tmpfs tmpfs "$root/tmp"; mounted="/tmp $mounted"
mount -t tmpfs tmpfs "$root/run"; mounted="/run $mounted"
cp /etc/resolv.conf "$root/etc/resolv.conf"

# Only gcc and make on top of minbase (apt is part of it).
chroot "$root" sh -c 'export DEBIAN_FRONTEND=noninteractive;
        apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc make >/dev/null'

rm -rf "$root/root/hbg"
mkdir -p "$root/root/hbg"
(cd "$src" && git ls-files -z | xargs -0 tar cf -) | tar xf - -C "$root/root/hbg"

echo "fresh-machine: make demo"
chroot "$root" sh -c 'cd /root/hbg && make demo'
echo "fresh-machine: make check"
chroot "$root" sh -c 'cd /root/hbg && make check'
echo "fresh-machine: both commands passed"
