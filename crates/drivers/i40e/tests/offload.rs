//! The i40e-class device does the offloads a descriptor asks for: a TCP
//! superframe leaves on a reflector wire as segments no larger than the
//! MTU its buffers were sized for, each with correct IPv4 and TCP
//! checksums; a partial checksum is completed; receive checksums are
//! verified and reported; a frame larger than the RX buffers' MTU is
//! dropped and counted, never delivered; and frames wait for RX buffers
//! (a reflector port stops sending while what comes back cannot wait)
//! rather than being dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::emu::WireMode;
use netadm_nic::offload::{self, F_DATA_VALID, F_NEEDS_CSUM, GSO_TCPV4, Offload};
use netadm_nic::{DmaRing, Nic, QueueId, buf_size_for_mtu};

/// Ethernet + IPv4 + TCP with `payload` bytes; checksums left to the
/// device (the TCP field holds the pseudo-header sum, as the stack
/// leaves it), so only the device can make them right.
fn superframe(payload: usize) -> Vec<u8> {
    let mut f = netadm_nic::testing::tcp4_frame(payload, 40000, 5201, 7, 0x18);
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    f
}

struct Port {
    nic: I40e,
    tx: Arc<DmaRing>,
    rx: Arc<DmaRing>,
}

/// One queue pair on a reflector wire, buffers sized for `mtu`.
fn port(mtu: u32) -> Port {
    let cfg = I40eConfig {
        queue_pairs: 1,
        ring_size: 256,
        wire: WireMode::Reflector,
        ..Default::default()
    };
    let nic = I40e::attach("off0", &cfg).unwrap();
    let ring = || Arc::new(DmaRing::new(256, buf_size_for_mtu(mtu), nic.dma_account()).unwrap());
    let (tx, rx) = (ring(), ring());
    // SAFETY: this test is the rings' only driver-side user.
    unsafe { rx.driver_post_all() };
    nic.set_ring(QueueId::tx(0), Some(tx.clone())).unwrap();
    nic.set_ring(QueueId::rx(0), Some(rx.clone())).unwrap();
    // The device takes only the buffers a tail doorbell announced.
    nic.doorbell(QueueId::rx(0));
    nic.request_enable(QueueId::tx(0)).unwrap();
    nic.request_enable(QueueId::rx(0)).unwrap();
    let qs = [QueueId::tx(0), QueueId::rx(0)];
    nic.wait_queues(&qs, true, Instant::now() + Duration::from_secs(2)).unwrap();
    Port { nic, tx, rx }
}

impl Port {
    fn send(&self, frame: &[u8], off: Offload) {
        // SAFETY: as above.
        assert!(unsafe { self.tx.driver_push_frame(frame, off) });
        self.nic.doorbell(QueueId::tx(0));
    }

    /// Frames received until `want` arrived or 2 s passed.
    fn receive(&self, want: usize) -> Vec<(Vec<u8>, Offload)> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let (mut got, mut scratch) = (vec![], vec![]);
        while got.len() < want && Instant::now() < deadline {
            // SAFETY: as above.
            unsafe {
                self.rx
                    .driver_reap_frames(u32::MAX, &mut scratch, |f, o| got.push((f.to_vec(), o)));
                self.rx.driver_post_all();
            }
            self.nic.doorbell(QueueId::rx(0));
            std::thread::yield_now();
        }
        got
    }
}

#[test]
fn a_superframe_leaves_as_checksummed_segments_no_larger_than_the_mtu() {
    let p = port(1500);
    let big = superframe(20_000);
    let mss = 1448u16;
    let off = Offload {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        hdr_len: 54,
        gso_size: mss,
        csum_start: 34,
        csum_offset: 16,
    };
    p.send(&big, off);
    let want = 20_000usize.div_ceil(mss.into());
    let got = p.receive(want);
    assert_eq!(got.len(), want, "every segment comes back from the reflector");
    let mut payload = vec![];
    for (i, (f, o)) in got.iter().enumerate() {
        assert!(f.len() <= 14 + 1500, "segment {i}: {} bytes exceed the MTU", f.len());
        assert_eq!(offload::verify_l4(f), Some(true), "segment {i}: TCP checksum");
        assert_eq!(o.flags & F_DATA_VALID, F_DATA_VALID, "segment {i}: receive checksum reported");
        payload.extend_from_slice(&f[54..]);
    }
    assert_eq!(payload, big[54..], "the payload, in order");
    let hw = p.nic.hw_stats();
    assert_eq!(hw.tx_tso_segments, want as u64);
    assert_eq!(hw.tx_malformed, 0);
}

#[test]
fn a_partial_checksum_is_completed_and_an_oversize_frame_is_dropped_and_counted() {
    let p = port(1500);
    let mut f = superframe(1000);
    // What the stack leaves for the NIC: the pseudo-header sum.
    let words = [0xc000u32, 0x0201, 0xc000, 0x0202, 6, 20 + 1000];
    let mut sum: u32 = words.iter().sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[50..52].copy_from_slice(&(sum as u16).to_be_bytes());
    assert_eq!(offload::verify_l4(&f), Some(false));
    let off = Offload { flags: F_NEEDS_CSUM, csum_start: 34, csum_offset: 16, ..Offload::NONE };
    p.send(&f, off);
    // A complete 4000-byte frame: it spans three TX descriptors, leaves
    // (it was sent under a larger MTU), and the reflector returns it to
    // RX buffers sized for 1500: dropped and counted.
    let mut jumbo = superframe(4000 - 54);
    offload::complete_csum(&mut jumbo, 34, 16);
    p.send(&jumbo, Offload::NONE);
    let got = p.receive(1);
    assert_eq!(got.len(), 1);
    assert_eq!(offload::verify_l4(&got[0].0), Some(true), "checksum filled in by the device");
    let deadline = Instant::now() + Duration::from_secs(2);
    while p.nic.hw_stats().rx_oversize == 0 && Instant::now() < deadline {
        std::thread::yield_now();
    }
    let hw = p.nic.hw_stats();
    assert_eq!((hw.rx_oversize, hw.rx_dropped), (1, 1), "{hw:?}");
    assert!(p.receive(1).is_empty(), "nothing oversize is delivered");
}

#[test]
fn frames_off_the_wire_wait_for_rx_buffers_instead_of_being_dropped() {
    let cfg =
        I40eConfig { queue_pairs: 1, ring_size: 64, wire: WireMode::Cable, ..Default::default() };
    let (a, b) = (I40e::attach("wa", &cfg).unwrap(), I40e::attach("wb", &cfg).unwrap());
    netadm_nic::emu::Device::cable(a.device(), b.device()).unwrap();
    let ring =
        |n: &I40e| Arc::new(DmaRing::new(64, buf_size_for_mtu(1500), n.dma_account()).unwrap());
    let (tx, rx) = (ring(&a), ring(&b));
    a.set_ring(QueueId::tx(0), Some(tx.clone())).unwrap();
    b.set_ring(QueueId::rx(0), Some(rx.clone())).unwrap();
    a.request_enable(QueueId::tx(0)).unwrap();
    b.request_enable(QueueId::rx(0)).unwrap();
    let soon = || Instant::now() + Duration::from_secs(2);
    a.wait_queues(&[QueueId::tx(0)], true, soon()).unwrap();
    b.wait_queues(&[QueueId::rx(0)], true, soon()).unwrap();
    // No RX buffer posted yet: 40 frames cross the cable and wait.
    for i in 0..40u8 {
        let mut f = superframe(100);
        f[60] = i;
        // SAFETY: this test is the rings' only driver-side user.
        assert!(unsafe { tx.driver_push(&f) });
    }
    a.doorbell(QueueId::tx(0));
    let deadline = soon();
    while a.hw_stats().tx_frames < 40 && Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(a.hw_stats().tx_frames, 40, "all sent");
    assert_eq!(b.hw_stats().rx_dropped, 0, "nothing dropped for want of buffers");
    assert_eq!(rx.completed(), 0);
    // Buffers posted and announced: every frame arrives, in order.
    let mut got = vec![];
    let mut scratch = vec![];
    while got.len() < 40 && Instant::now() < deadline {
        // SAFETY: as above.
        unsafe {
            rx.driver_post_all();
            b.doorbell(QueueId::rx(0));
            rx.driver_reap_frames(u32::MAX, &mut scratch, |f, _| got.push(f[60]));
        }
        std::thread::yield_now();
    }
    assert_eq!(got, (0..40).collect::<Vec<u8>>());
    assert_eq!((b.hw_stats().rx_dropped, a.hw_stats().wire_dropped), (0, 0));
}

#[test]
fn a_reflector_port_holds_its_tx_rather_than_overflow_its_packet_buffer() {
    // Two TX queues of 4096 frames: twice what the 4096-frame receive
    // packet buffer holds, sent while the host takes nothing back.
    const N: u16 = 4096;
    let cfg = I40eConfig {
        queue_pairs: 2,
        ring_size: u32::from(N),
        wire: WireMode::Reflector,
        ..Default::default()
    };
    let nic = I40e::attach("fc0", &cfg).unwrap();
    let ring =
        || Arc::new(DmaRing::new(N.into(), buf_size_for_mtu(1500), nic.dma_account()).unwrap());
    let (tx, rx) = ([ring(), ring()], [ring(), ring()]);
    let mut qs = vec![];
    for q in 0..2u16 {
        nic.set_ring(QueueId::tx(q), Some(tx[q as usize].clone())).unwrap();
        nic.set_ring(QueueId::rx(q), Some(rx[q as usize].clone())).unwrap();
        qs.extend([QueueId::tx(q), QueueId::rx(q)]);
    }
    for &q in &qs {
        nic.request_enable(q).unwrap();
    }
    let soon = || Instant::now() + Duration::from_secs(5);
    nic.wait_queues(&qs, true, soon()).unwrap();
    // Frame i of queue q carries (q, i); every frame is one flow.
    for q in 0..2u16 {
        for i in 0..N {
            let mut f = superframe(100);
            f[60..62].copy_from_slice(&q.to_be_bytes());
            f[62..64].copy_from_slice(&i.to_be_bytes());
            // SAFETY: this test is the rings' only driver-side user.
            assert!(unsafe { tx[q as usize].driver_push(&f) });
        }
        nic.doorbell(QueueId::tx(q));
    }
    // No RX buffer announced: what comes back waits in the packet buffer,
    // which fills (less the room kept for a superframe's segments), and
    // then the port stops sending (flow control) instead of dropping.
    let deadline = soon();
    while nic.hw_stats().tx_frames < u64::from(N - 128) && Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert!(rx.iter().all(|r| r.completed() == 0), "nothing delivered without buffers");
    // Buffers announced: everything arrives, each queue's frames in order.
    let mut got: [Vec<u16>; 2] = [vec![], vec![]];
    let mut scratch = vec![];
    let deadline = soon();
    while got.iter().map(Vec::len).sum::<usize>() < 2 * usize::from(N) && Instant::now() < deadline
    {
        for (q, r) in rx.iter().enumerate() {
            // SAFETY: as above.
            unsafe {
                r.driver_reap_frames(u32::MAX, &mut scratch, |f, _| {
                    let src = usize::from(u16::from_be_bytes([f[60], f[61]]));
                    got[src].push(u16::from_be_bytes([f[62], f[63]]));
                });
                r.driver_post_all();
            }
            nic.doorbell(QueueId::rx(q as u16));
        }
        std::thread::yield_now();
    }
    let hw = nic.hw_stats();
    assert_eq!((hw.wire_dropped, hw.rx_dropped), (0, 0), "nothing dropped: {hw:?}");
    for (q, seqs) in got.iter().enumerate() {
        assert_eq!(*seqs, (0..N).collect::<Vec<u16>>(), "queue {q}: every frame, in order");
    }
}
