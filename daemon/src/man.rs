//! `netadmd --generate-man DIR --man-date DATE` (feature `gen`, run by
//! `packaging/build-deb`): netadmd(8), its options from the clap
//! definition it parses with (clap_mangen), and the sections a command
//! line cannot say.

use std::path::Path;

use clap::CommandFactory;
use clap_mangen::Man;

/// What follows the options: the bus, signals, exit status, environment,
/// files, examples.
const REST: &str = r#".SH "D-BUS"
netadmd owns org.netadm.Netadm1 on the bus it is given (the system bus under
its unit) and serves the manager object /org/netadm/Netadm1 and one object per
datalink under /org/netadm/Netadm1/links. Anyone may call its Show methods;
only root and members of the admin group (\-\-admin\-group, default netadm) may
change anything, which the bus policy enforces and netadmd checks again from
each caller's credentials. The interface is in
/usr/share/dbus-1/interfaces/org.netadm.Netadm1.xml; a member once released
never changes (see docs/DBUS.md).
.SH SIGNALS
.TP
.B SIGTERM, SIGINT
Stop after the change in progress has finished and persisted; the journal is
folded into links.toml; exit 0.
.SH "EXIT STATUS"
.TP
.B 0
Stopped by a signal, cleanly.
.TP
.B 1
It could not start: an unreadable or invalid hardware configuration or
persistent configuration (the message names the file, line and column), a
port the persistent configuration names that the hardware does not have, or
a bus it could not own its name on.
.SH ENVIRONMENT
.TP
.B RUST_LOG
The log level and filter (default info; zbus's own spans and messages only
from warn unless it names zbus). Logs go to the journal when standard
error is the journal's stream (as under systemd), else to standard error.
.SH FILES
.TP
.B /run/netadm/private
The private socket (with \-\-bus system, unless \-\-private\-socket says
otherwise): org.netadm.Netadm1 peer to peer, with no bus between, mode 0600.
netadm(8) run as root connects to it first; it is removed when netadmd stops.
.TP
.B /etc/netadm/netadm.toml
The hardware configuration the unit passes with \-\-config
(netadm.toml(5)); without \-\-config, a built-in default of emulated ports.
.TP
.B /var/lib/netadm/links.toml
The persistent configuration, replayed at start; links.journal holds changes
appended since it was written whole, links.checkpoint.toml what an armed
apply \-\-confirm\-timeout rolls back to.
.TP
.B /usr/lib/systemd/system/netadmd.service
The unit: Type=dbus, hardened, with only CAP_NET_ADMIN and CAP_NET_RAW.
.TP
.B /usr/share/dbus-1/system.d/org.netadm.Netadm1.conf
The bus policy.
.SH EXAMPLES
Under systemd:
.PP
.RS 4
.EX
systemctl enable \-\-now netadmd
journalctl \-u netadmd
.EE
.RE
.PP
By hand, on a bus of its own, unprivileged (no kernel devices):
.PP
.RS 4
.EX
dbus\-daemon \-\-session \-\-fork \-\-print\-address
netadmd \-\-bus ADDRESS \-\-state\-dir /tmp/netadm \-\-kernel\-mirror off
.EE
.RE
.SH "SEE ALSO"
netadm(8), dladm(8), ipadm(8), netadm.toml(5), systemd.exec(5)
"#;

/// Writes `DIR/netadmd.8`, dated `date`.
pub fn write(dir: &Path, date: &str) -> Result<(), String> {
    let cmd = crate::Args::command();
    let version = cmd.get_version().unwrap_or_default().to_owned();
    let man = Man::new(cmd)
        .title("NETADMD")
        .section("8")
        .date(date)
        .source(format!("netadm {version}"))
        .manual("System Administration");
    let mut out = Vec::new();
    man.render_title(&mut out)
        .and_then(|()| man.render_name_section(&mut out))
        .and_then(|()| man.render_synopsis_section(&mut out))
        .and_then(|()| man.render_description_section(&mut out))
        .and_then(|()| man.render_options_section(&mut out))
        .map_err(|e| e.to_string())?;
    let mut page = String::from_utf8(out).expect("roff is text").replace('`', "");
    page += REST;
    let path = dir.join("netadmd.8");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, page))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_has_the_options_and_the_sections() {
        let dir = tempfile::tempdir().unwrap();
        super::write(dir.path(), "2026-12-01").unwrap();
        let page = std::fs::read_to_string(dir.path().join("netadmd.8")).unwrap();
        for want in [
            ".TH NETADMD 8 2026-12-01",
            "\\-\\-state\\-dir",
            "\\-\\-metrics\\-listen",
            ".SH SIGNALS",
            ".SH \"EXIT STATUS\"",
            ".SH FILES",
        ] {
            assert!(page.contains(want), "no {want:?} in:\n{page}");
        }
        assert!(!page.contains("generate\\-man"), "the hidden option is not on the page");
    }
}
