//! The Debian package (`packaging/build-deb`), installed by apt into the
//! bookworm root the systemd test boots (`nspawn`), and taken through its
//! life there: install (the unit enabled and active, `dladm show-link`
//! answering on the system bus, the netadm group, the conffile, `man
//! dladm`, tab completion of link names in bash), an upgrade to a newer
//! build (the state in /var/lib/netadm kept, an edited conffile kept, the
//! service restarted), remove (the service stopped, state and conffile
//! kept) and purge (both gone). lintian first: no errors.
//!
//! The package is built beforehand (`.ci/run` runs `packaging/build-deb`);
//! without one the test says so and is skipped, or fails under `CI=true`.
//! The newer build is the same package repacked with a higher version
//! (`dpkg-deb`), which is what an upgrade's maintainer scripts see.

use std::path::{Path, PathBuf};
use std::process::Command;

use netadm_testkit::*;

mod nspawn;
use nspawn::{Container, Setup, await_unit};

/// The package `packaging/build-deb` made for this version: the highest
/// revision in target/debian.
fn built_package() -> Option<PathBuf> {
    let dir = repo_root().join("target/debian");
    let prefix = format!("netadm_{}-", env!("CARGO_PKG_VERSION"));
    let mut debs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(".deb")
        })
        .collect();
    debs.sort();
    debs.pop()
}

/// `deb` repacked as version `version`, in `dir`.
fn repacked(deb: &Path, version: &str, dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    run(&["dpkg-deb", "-R", deb.to_str().unwrap(), tree.to_str().unwrap()]).unwrap();
    let control = tree.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).unwrap();
    let text: String = text
        .lines()
        .map(|l| if l.starts_with("Version: ") { format!("Version: {version}") } else { l.into() })
        .map(|l| l + "\n")
        .collect();
    std::fs::write(&control, text).unwrap();
    let out = dir.join(format!("netadm_{version}_amd64.deb"));
    run(&["dpkg-deb", "--root-owner-group", "-b", tree.to_str().unwrap(), out.to_str().unwrap()])
        .unwrap();
    out
}

/// `dpkg-query`'s status and version of netadm in the container.
fn installed(c: &Container) -> String {
    let out = c.exec(&["dpkg-query", "-W", "-f", "${db:Status-Abbrev}${Version}", "netadm"]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// apt in the container, from the packages copied in (no network: their
/// dependencies are in the root already).
fn apt(c: &Container, args: &[&str]) -> String {
    let mut cmd = vec!["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-y", "-q"];
    cmd.extend_from_slice(args);
    let out = c.ok(&["sh", "-c", &format!("cd /var/tmp/pkgs && {} 2>&1", cmd.join(" "))]);
    eprintln!("apt-get {args:?}:\n{out}");
    out
}

/// What bash offers after `line` in the container, through
/// bash-completion's loader as an interactive shell would load it.
fn complete(c: &Container, line: &str) -> String {
    let script = format!(
        ". /usr/share/bash-completion/bash_completion\n\
         read -ra COMP_WORDS <<< '{line}'; COMP_WORDS+=('')\n\
         COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMP_LINE='{line} '; COMP_POINT=${{#COMP_LINE}}\n\
         _completion_loader {cmd}\n\
         f=$(complete -p {cmd} | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
         $f {cmd} '' \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        cmd = line.split_whitespace().next().unwrap()
    );
    c.ok(&["bash", "-c", &script])
}

#[test]
fn the_package_installs_upgrades_removes_and_purges_in_a_booted_root() {
    if !nspawn::prerequisites(&[("dpkg-deb", "dpkg"), ("lintian", "lintian")]) {
        return;
    }
    let Some(deb) = built_package() else {
        let what = "no target/debian/netadm_VERSION-*.deb: run packaging/build-deb";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {what}");
        eprintln!("skipped: {what}");
        return;
    };
    eprintln!("package: {} ({} bytes)", deb.display(), std::fs::metadata(&deb).unwrap().len());

    // lintian: no errors (warnings and notes printed, not failed on).
    let lint = Command::new("lintian")
        .args(["--fail-on", "error", "--display-info", "--no-tag-display-limit"])
        .arg(&deb)
        .output()
        .unwrap();
    eprintln!(
        "lintian:\n{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    assert!(lint.status.success(), "lintian reports errors");

    let version = run(&["dpkg-deb", "-f", deb.to_str().unwrap(), "Version"]).unwrap();
    let version = version.trim();
    let work = tempfile::tempdir().unwrap();
    // The shipped netadm is static: a command's start runs no dynamic
    // loader. netadmd is not (it looks groups up through NSS).
    let files = work.path().join("files");
    run(&["dpkg-deb", "-x", deb.to_str().unwrap(), files.to_str().unwrap()]).unwrap();
    assert_eq!(interpreter(&files.join("usr/bin/netadm")).unwrap(), None, "netadm is dynamic");
    assert!(interpreter(&files.join("usr/sbin/netadmd")).unwrap().is_some());
    let newer_version = format!("{version}+upgrade1");
    let newer = repacked(&deb, &newer_version, work.path());
    let c = Container::boot(Setup::Files(&[deb.clone(), newer.clone()]));
    let first = deb.file_name().unwrap().to_str().unwrap();
    let second = newer.file_name().unwrap().to_str().unwrap();

    // Install: enabled, started, answering on the system bus.
    apt(&c, &["install", &format!("./{first}")]);
    assert_eq!(installed(&c), format!("ii {version}"));
    assert_eq!(c.ok(&["systemctl", "is-enabled", "netadmd.service"]).trim(), "enabled");
    await_unit(&c, "netadmd active after install", |c| c.unit("ActiveState") == "active");
    let links = c.ok(&["dladm", "show-link", "-p", "-o", "link"]);
    assert!(links.lines().any(|l| l == "i40e0"), "dladm show-link: {links}");
    // Root's commands go over netadmd's private socket, root's alone; the
    // bus's answer is the same.
    let socket = c.ok(&["stat", "-c", "%F %a %U", "/run/netadm/private"]);
    assert_eq!(socket.trim(), "socket 600 root", "/run/netadm/private");
    let on_bus = c.ok(&["env", "NETADM_PRIVATE=", "dladm", "show-link", "-p", "-o", "link"]);
    assert_eq!(on_bus, links, "the bus and the private socket answer alike");
    assert!(c.ok(&["getent", "group", "netadm"]).starts_with("netadm:"));
    let conffiles = c.ok(&["dpkg-query", "-W", "-f", "${Conffiles}", "netadm"]);
    assert!(conffiles.contains("/etc/netadm/netadm.toml"), "conffiles: {conffiles}");
    assert!(c.ok(&["readlink", "/usr/sbin/ipadm"]).trim() == "../bin/netadm");
    for illumos in ["dlstat", "flowadm", "flowstat"] {
        let to = c.ok(&["readlink", &format!("/usr/sbin/{illumos}")]);
        assert_eq!(to.trim(), "../bin/netadm", "/usr/sbin/{illumos}");
    }
    let counted = c.ok(&["dlstat", "show-phys", "-p", "-o", "link"]);
    assert!(counted.lines().any(|l| l == "i40e0"), "dlstat show-phys: {counted}");
    // The manual and tab completion.
    let page = c.ok(&["env", "MANPAGER=cat", "MANWIDTH=80", "man", "dladm"]);
    assert!(page.contains("show-ether") && page.contains("EXIT STATUS"), "man dladm: {page}");
    for topic in ["netadm", "ipadm", "dlstat", "flowadm", "flowstat", "netadmd", "netadm.toml"] {
        c.ok(&["env", "MANPAGER=cat", "man", "-w", topic]);
    }
    let offered = complete(&c, "dladm show-link");
    assert!(offered.lines().any(|l| l == "i40e0"), "dladm show-link <TAB>: {offered}");
    let offered = complete(&c, "netadm show-l");
    assert!(offered.lines().any(|l| l == "show-link"), "netadm show-l<TAB>: {offered}");

    // State, an edited conffile, then the upgrade.
    c.ok(&["netadm", "create-vnic", "-l", "i40e0", "vnic0"]);
    c.ok(&["netadm", "set-linkprop", "-p", "mtu=1400", "vnic0"]);
    c.ok(&["sh", "-c", "echo '# edited here' >> /etc/netadm/netadm.toml"]);
    let pid = c.unit("MainPID");
    apt(&c, &["install", &format!("./{second}")]);
    assert_eq!(installed(&c), format!("ii {newer_version}"));
    await_unit(&c, "netadmd restarted by the upgrade", |c| {
        c.unit("ActiveState") == "active" && c.unit("MainPID") != pid
    });
    let mtu = c.ok(&["dladm", "show-linkprop", "-c", "-o", "value", "-p", "mtu", "vnic0"]);
    assert_eq!(mtu.trim(), "1400", "the state survives the upgrade");
    assert!(c.ok(&["cat", "/etc/netadm/netadm.toml"]).contains("# edited here"));

    // Remove: stopped, state and conffile kept.
    apt(&c, &["remove", "netadm"]);
    assert_eq!(c.unit("ActiveState"), "inactive");
    assert!(c.exec(&["test", "-e", "/usr/bin/netadm"]).status.code() == Some(1));
    c.ok(&["test", "-f", "/var/lib/netadm/links.toml"]);
    c.ok(&["test", "-f", "/etc/netadm/netadm.toml"]);
    assert!(installed(&c).starts_with("rc "), "removed: {}", installed(&c));

    // Purge: the state and the conffile gone.
    apt(&c, &["purge", "netadm"]);
    for gone in ["/var/lib/netadm", "/etc/netadm/netadm.toml"] {
        assert!(c.exec(&["test", "-e", gone]).status.code() == Some(1), "{gone} survived purge");
    }
    assert_eq!(installed(&c), "", "purged");
}
