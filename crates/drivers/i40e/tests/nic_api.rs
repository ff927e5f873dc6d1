//! What the core asks of an i40e-class port through the driver API alone:
//! its capabilities as data, moderation by knob, and the driver's own
//! methods reached through a wrapper layered over it.

use std::sync::Arc;
use std::time::Duration;

use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::testing::FaultyNic;
use netadm_nic::{DmaRing, Moderation, Nic, NicClass, NicError, QueueId};

fn port(name: &str) -> I40e {
    I40e::attach(name, &I40eConfig { queue_pairs: 16, vectors: 4, ..Default::default() }).unwrap()
}

/// Every vector's throttle register.
fn throttles(nic: &dyn Nic) -> Vec<u32> {
    let hw = nic.device().expect("an emulated port");
    (0..nic.caps().vectors).map(|v| hw.read_throttle(v).unwrap()).collect()
}

#[test]
fn the_caps_say_what_the_class_has() {
    let nic = port("c0");
    let c = nic.caps();
    assert_eq!((c.class, c.driver, c.oui), (NicClass::I40e, "i40e", [0x00, 0x1b, 0x21]));
    assert_eq!(c.rss_table_size, netadm_i40e::hw::RSS_TABLE_SIZE);
    assert_eq!(c.ring_groups, 1536);
    assert_eq!(c.vlan_filters, netadm_nic::vlan::FILTER_ENTRIES);
    assert!(c.offloads.tso);
    assert_eq!(
        c.moderation,
        [Moderation {
            prop: "itr",
            unit: Duration::from_micros(1),
            default: netadm_i40e::DEFAULT_ITR_UNITS,
            vectors: 0..4,
            adaptive: true,
        }]
    );
}

#[test]
fn itr_set_by_its_knob_lands_where_the_per_vector_writes_put_it() {
    let (by_knob, by_vector) = (port("m0"), port("m1"));
    assert_eq!(throttles(&by_knob), [25; 4], "attach writes the default on every vector");
    let knob = by_knob.caps().moderation[0].clone();
    // What the core wrote for itr=51 µs: 26 × 2 µs on each vector.
    for v in 0..4 {
        by_vector.set_throttle(v, 51u32.div_ceil(2)).unwrap();
    }
    by_knob.set_moderation(&knob, Some(51)).unwrap();
    assert_eq!(throttles(&by_knob), throttles(&by_vector));
    assert_eq!(throttles(&by_knob), [26; 4]);
    // Unset: back to the default.
    by_knob.set_moderation(&knob, None).unwrap();
    assert_eq!(throttles(&by_knob), [25; 4]);
    // Out of the register's range: refused as a direct write is.
    assert!(matches!(
        by_knob.set_moderation(&knob, Some(8192)),
        Err(NicError::OutOfRange { register: "interrupt throttle", value: 4096, .. })
    ));
}

#[test]
fn a_knob_the_port_lacks_is_unsupported_and_writes_nothing() {
    let nic = port("m2");
    let imt = Moderation {
        prop: "rx-imt",
        unit: Duration::from_micros(2),
        default: 200,
        vectors: 0..1,
        adaptive: true,
    };
    let e = nic.set_moderation(&imt, Some(7)).unwrap_err();
    assert_eq!(e, NicError::Unsupported { class: NicClass::I40e, feature: "rx-imt" });
    assert_eq!(e.to_string(), "i40e-class device has no rx-imt");
    assert_eq!(throttles(&nic), [25; 4]);
}

#[test]
fn through_a_wrapper_every_call_reaches_the_drivers_own_methods() {
    let inner = Arc::new(port("w0"));
    let nic = FaultyNic::new(inner.clone(), Duration::from_millis(300));
    // i40e's ring checks, not the bare device's.
    let short = Arc::new(DmaRing::new(64, 1536, nic.dma_account()).unwrap());
    assert!(matches!(
        nic.set_ring(QueueId::tx(0), Some(short)),
        Err(NicError::OutOfRange { register: "queue context qlen", value: 64, max: 512 })
    ));
    // i40e's vector layout: pairs round robin over the 4 vectors.
    assert_eq!(nic.default_vector(QueueId::rx(9)), 1);
    // Its filters and RSS, on the one device.
    assert!(std::ptr::eq(nic.device().unwrap(), inner.device()));
    nic.set_vlan_filter(42, true).unwrap();
    assert_eq!(inner.vlan_filter(), [42]);
    assert_eq!(nic.vlan_filter(), Ok(vec![42]));
    nic.set_rss_entry(511, 15).unwrap();
    assert!(matches!(nic.set_rss_entry(512, 0), Err(NicError::OutOfRange { .. })));
    // The wrapper's own change stays its own.
    assert_eq!(nic.caps().queue_ack_deadline, Duration::from_millis(300));
    assert_ne!(inner.caps().queue_ack_deadline, Duration::from_millis(300));
}
