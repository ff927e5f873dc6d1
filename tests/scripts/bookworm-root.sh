#!/bin/sh
# Prints the path of a minimal Debian bookworm root with systemd and D-Bus,
# for the test that boots netadmd under a real systemd (tests/tests/systemd.rs).
# Built once with debootstrap (about 3 minutes here) from the Debian mirror
# apt already uses, and kept in NETADM_TEST_CACHE (default
# /var/cache/netadm-test); later runs only print the path. The root is never
# written to: the test boots an overlay of it.
set -eu
cache=${NETADM_TEST_CACHE:-/var/cache/netadm-test}
root=$cache/bookworm
include=systemd,systemd-sysv,dbus,procps
stamp="debootstrap --variant=minbase --include=$include bookworm"
mkdir -p "$cache"
# One builder at a time; the others wait for it and reuse its root.
exec 9>"$cache/bookworm.lock"
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
