//! The kernel mirror against the real kernel, in a network namespace of
//! the test's own (a thread that unshares one), so nothing touches the
//! host's interfaces. Skips, saying so, when not root — except under CI
//! (`CI=true`), where not being root fails the test.

use std::net::IpAddr;

use netadm_kernel::{Events, KernelError, Netlink, Tap, Touched};

mod common;
use common::skip;

/// Runs `f` on a thread in a fresh network namespace; not when the test
/// is skipped ([`skip`]).
fn in_netns(f: impl FnOnce() + Send + 'static) {
    if skip() {
        return;
    }
    std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNET) only changes this thread's
        // namespace; the thread ends with the test body.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn a_tap_is_created_configured_read_back_and_gone_when_dropped() {
    in_netns(|| {
        let nl = Netlink::open().unwrap();
        let tap = Tap::create("natest0").unwrap();
        let i = nl.index("natest0").unwrap();
        nl.set_link(i, Some(true), Some(9000)).unwrap();
        let l = nl.link(i).unwrap();
        assert_eq!((l.name.as_str(), l.mtu, l.up), ("natest0", 9000, true));
        assert_ne!(l.mac, [0; 6]);

        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        nl.add_addr(i, v4, 24).unwrap();
        nl.add_addr(i, v6, 64).unwrap();
        let addrs = nl.addrs(i).unwrap();
        assert!(addrs.contains(&(v4, 24)) && addrs.contains(&(v6, 64)), "{addrs:?}");
        assert!(matches!(nl.add_addr(i, v4, 24), Err(KernelError::Exists { .. })));
        nl.del_addr(i, v4, 24).unwrap();
        assert!(!nl.addrs(i).unwrap().contains(&(v4, 24)));
        assert!(matches!(nl.del_addr(i, v4, 24), Err(KernelError::NotFound { .. })));

        // The same name twice is refused; a name the kernel cannot take too.
        assert!(matches!(Tap::create("natest0"), Err(KernelError::Exists { .. })));
        assert!(matches!(Tap::create("much_too_long_name0"), Err(KernelError::BadName { .. })));
        assert!(
            matches!(nl.set_link(i, None, Some(10)), Err(KernelError::Refused { .. })),
            "MTU below IPv4's minimum"
        );

        drop(tap);
        assert!(
            matches!(nl.index("natest0"), Err(KernelError::NotFound { .. })),
            "closing it removes it"
        );
    });
}

#[test]
fn notifications_name_the_link_changed_and_stop_wakes_the_waiter() {
    in_netns(|| {
        // Two subscriptions, each hearing every notification.
        let nl = Netlink::open().unwrap();
        let (one, own) = (Events::open().unwrap(), Events::open().unwrap());
        let _tap = Tap::create("naev0").unwrap();
        let i = nl.index("naev0").unwrap();
        nl.set_link(i, None, Some(1400)).unwrap();
        // SAFETY: eventfd(2); checked.
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(stop >= 0);
        for ev in [&one, &own] {
            // Wait until a batch names the link (its creation may come first).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                match ev.wait(stop).unwrap() {
                    Some(Touched::Indices(ix)) if ix.contains(&i) => break,
                    Some(_) => assert!(std::time::Instant::now() < deadline, "no notification"),
                    None => panic!("stopped without being asked"),
                }
            }
        }
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes to our eventfd.
        assert_eq!(unsafe { libc::write(stop, one.as_ptr().cast(), 8) }, 8);
        assert_eq!(own.wait(stop).unwrap(), None, "stop wakes the waiter");
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(stop) };
    });
}

/// A DHCP client's socket (`PacketSocket::open_udp4`) is given UDP to
/// its port only: of an IPv4 datagram to port 69, a TCP segment and a
/// UDP datagram to port 68 sent in that order over a veth, the first it
/// receives is the last.
#[test]
fn a_udp4_packet_socket_is_given_only_udp_to_its_port() {
    in_netns(|| {
        let nl = Netlink::open().unwrap();
        let up = netadm_kernel::NewLink { up: true, ..Default::default() };
        nl.add_veth("pka", "pkb", &up, None).unwrap();
        let (a, b) = (nl.index("pka").unwrap(), nl.index("pkb").unwrap());
        nl.set_link(b, Some(true), None).unwrap();
        let ear = netadm_kernel::PacketSocket::open_udp4(b, 68).unwrap();
        let mouth = netadm_kernel::PacketSocket::open(a, 0x0800).unwrap();
        // An IPv4 header (20 bytes, protocol `proto`), then 8 bytes of UDP
        // or the start of TCP (both begin with the ports), then `mark`.
        let packet = |proto: u8, dport: u16, mark: &[u8]| {
            let len = (28 + mark.len()) as u16;
            let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
            p[2..4].copy_from_slice(&len.to_be_bytes());
            p.extend(67u16.to_be_bytes());
            p.extend(dport.to_be_bytes());
            p.extend(((8 + mark.len()) as u16).to_be_bytes());
            p.extend([0, 0]);
            p.extend(mark);
            p
        };
        let bcast = [0xff; 6];
        mouth.send(bcast, &packet(17, 69, b"UDP-69")).unwrap();
        mouth.send(bcast, &packet(6, 68, b"TCP-68")).unwrap();
        mouth.send(bcast, &packet(17, 68, b"UDP-68")).unwrap();
        let stop = netadm_kernel::eventfd().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut buf = [0u8; 2048];
        let got = ear.recv(&mut buf, deadline, std::os::fd::AsRawFd::as_raw_fd(&stop)).unwrap();
        let (n, _) = got.expect("nothing received within 5 s");
        assert!(buf[..n].ends_with(b"UDP-68"), "first received: {:?}", &buf[..n]);
    })
}
