#!/bin/sh
# Installs netadm: binaries, systemd unit, D-Bus policy and activation file,
# and the default hardware configuration. Run from the repository root after
# `cargo build --release --workspace`. DESTDIR stages into another root;
# BINDIR names the directory of the binaries (default target/release).
set -eu
D=${DESTDIR:-}
B=${BINDIR:-target/release}
install -Dm755 "$B/netadmd" "$D/usr/sbin/netadmd"
install -Dm755 "$B/netadm" "$D/usr/bin/netadm"
# dladm, ipadm, dlstat, flowadm and flowstat are netadm under illumos's
# names (it reads argv[0]),
# where illumos has them.
ln -sf ../bin/netadm "$D/usr/sbin/dladm"
ln -sf ../bin/netadm "$D/usr/sbin/ipadm"
ln -sf ../bin/netadm "$D/usr/sbin/dlstat"
ln -sf ../bin/netadm "$D/usr/sbin/flowadm"
ln -sf ../bin/netadm "$D/usr/sbin/flowstat"
install -Dm644 systemd/netadmd.service "$D/usr/lib/systemd/system/netadmd.service"
install -Dm644 systemd/org.netadm.Netadm1.conf "$D/usr/share/dbus-1/system.d/org.netadm.Netadm1.conf"
install -Dm644 systemd/org.netadm.Netadm1.service "$D/usr/share/dbus-1/system-services/org.netadm.Netadm1.service"
install -Dm644 config/netadm.toml "$D/usr/share/netadm/netadm.toml"
# The hardware configuration the unit names: the default, unless one is
# there already (yours).
[ -e "$D/etc/netadm/netadm.toml" ] || install -Dm644 config/netadm.toml "$D/etc/netadm/netadm.toml"
install -Dm644 README.md "$D/usr/share/doc/netadm/README.md"
if [ -z "$D" ]; then
  getent group netadm >/dev/null || groupadd --system netadm
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl reload dbus 2>/dev/null || true
    echo "installed; start it with: systemctl enable --now netadmd"
  fi
fi
