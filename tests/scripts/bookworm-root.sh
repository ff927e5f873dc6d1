#!/bin/sh
# Prints the path of a minimal Debian bookworm root with systemd and D-Bus,
# for the tests that boot netadm under a real systemd (tests/tests/systemd.rs,
# tests/tests/package.rs).
# Built once with debootstrap (about 3 minutes here) from the Debian mirror
# apt already uses, and kept in NETADM_TEST_CACHE (default
# /var/cache/netadm-test); later runs only print the path. The root is never
# written to: the test boots an overlay of it.
set -eu
cache=${NETADM_TEST_CACHE:-/var/cache/netadm-test}
# man-db and bash-completion: the package test reads man dladm and
# completes in bash there. nftables: the package recommends it (protection
# and flows on kernel links), and apt installs what a package recommends;
# the container has no network to fetch it.
include=systemd,systemd-sysv,dbus,procps,man-db,bash-completion,nftables
stamp="debootstrap --variant=minbase --include=$include bookworm"
# A root per recipe, so that trees with different recipes (branches) share
# the cache without rebuilding each other's root.
root=$cache/bookworm-$(printf %s "$stamp" | cksum | cut -d' ' -f1)
mkdir -p "$cache"
# One builder at a time; the others wait for it and reuse its root.
exec 9>"$root.lock"
flock 9
if [ "$(cat "$root/.netadm-test-root" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$root" "$root.tmp"
  # The mirror of apt's own bookworm source; debootstrap's default if none.
  mirror=$(apt-cache policy 2>/dev/null | awk '$3 ~ /^bookworm\// && $2 ~ /^https?:/ {print $2; exit}')
  echo "building $root: $stamp ${mirror:-(default mirror)}" >&2
  # shellcheck disable=SC2086 # an empty mirror is no argument
  debootstrap --variant=minbase --include="$include" bookworm "$root.tmp" $mirror >&2
  rm -f "$root.tmp"/var/cache/apt/archives/*.deb
  echo "$stamp" > "$root.tmp/.netadm-test-root"
  mv "$root.tmp" "$root"
fi
echo "$root"
