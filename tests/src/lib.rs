//! End-to-end tests (`tests/*.rs`): a private `dbus-daemon`, a real
//! `netadmd` on it and the real `netadm` binary, started and driven
//! through `netadm-testkit`, which holds the whole harness (the bus, the
//! daemon, the CLI's JSON, hardware fixtures, network namespaces). This
//! library is empty: a package needs one target of its own.
