//! What the core asks of an atl1c-class port through the driver API alone:
//! its capabilities as data, its two moderation timers by knob, and a
//! clear `Unsupported` for what the class lacks, also through a wrapper.

use std::time::Duration;

use netadm_atl1c::hw::{RX_VECTOR, TX_VECTOR};
use netadm_atl1c::{Atl1c, Atl1cConfig};
use netadm_nic::emu::MacFilter;
use netadm_nic::testing::FaultyNic;
use netadm_nic::{Moderation, Nic, NicClass, NicError, QueueId};

fn port(name: &str) -> Atl1c {
    Atl1c::attach(name, &Atl1cConfig::default()).unwrap()
}

/// The RX and TX moderation timers.
fn timers(nic: &dyn Nic) -> [u32; 2] {
    let hw = nic.device().expect("an emulated port");
    [hw.read_throttle(RX_VECTOR).unwrap(), hw.read_throttle(TX_VECTOR).unwrap()]
}

#[test]
fn the_caps_say_what_the_class_has_and_lacks() {
    let nic = port("c0");
    let c = nic.caps();
    assert_eq!((c.class, c.driver, c.oui), (NicClass::Atl1c, "atl1c", [0x00, 0x13, 0x74]));
    assert_eq!((c.rss_table_size, c.ring_groups, c.vlan_filters), (0, 0, 0));
    assert!(!c.offloads.tso);
    let imt = |prop, default, v: u16, adaptive| Moderation {
        prop,
        unit: Duration::from_micros(2),
        default,
        vectors: v..v + 1,
        adaptive,
    };
    assert_eq!(c.moderation, [imt("rx-imt", 200, 0, true), imt("tx-imt", 1000, 1, false)]);
}

#[test]
fn each_timer_set_by_its_knob_lands_where_set_rx_imt_and_set_tx_imt_put_it() {
    let (by_knob, by_name) = (port("m0"), port("m1"));
    assert_eq!(timers(&by_knob), [200, 1000], "attach writes Linux's defaults");
    let [rx, tx] = [0, 1].map(|i| by_knob.caps().moderation[i].clone());
    by_name.set_rx_imt(77).unwrap();
    by_knob.set_moderation(&rx, Some(77)).unwrap();
    assert_eq!(timers(&by_knob), [77, 1000], "rx-imt leaves the TX timer alone");
    by_name.set_tx_imt(300).unwrap();
    by_knob.set_moderation(&tx, Some(300)).unwrap();
    assert_eq!(timers(&by_knob), timers(&by_name));
    assert_eq!(timers(&by_knob), [77, 300]);
    for k in [&rx, &tx] {
        by_knob.set_moderation(k, None).unwrap();
    }
    assert_eq!(timers(&by_knob), [200, 1000], "unset: the defaults");
}

#[test]
fn what_the_class_lacks_is_unsupported_by_name_also_through_a_wrapper() {
    let inner = std::sync::Arc::new(port("u0"));
    let wrapped = FaultyNic::new(inner.clone(), Duration::from_millis(300));
    let itr = Moderation {
        prop: "itr",
        unit: Duration::from_micros(1),
        default: 25,
        vectors: 0..2,
        adaptive: true,
    };
    let f = MacFilter { mac: [2, 0, 0, 0, 0, 1], first_queue: 0, queues: 1 };
    for nic in [&*inner as &dyn Nic, &wrapped] {
        let no = |feature| Err(NicError::Unsupported { class: NicClass::Atl1c, feature });
        assert_eq!(nic.set_rss_entry(0, 0), no("RSS"));
        assert_eq!(nic.set_mac_filter(0, Some(f)), no("MAC filter table"));
        assert_eq!(nic.set_vlan_filter(10, true), no("VLAN filter table"));
        assert_eq!(nic.vlan_filter(), no("VLAN filter table").map(|()| vec![]));
        assert_eq!(nic.set_moderation(&itr, Some(50)), no("itr"));
        assert_eq!(
            nic.set_rss_entry(0, 0).unwrap_err().to_string(),
            "atl1c-class device has no RSS"
        );
        assert_eq!(timers(nic), [200, 1000], "nothing written");
    }
}

#[test]
fn through_a_wrapper_every_call_reaches_the_drivers_own_methods() {
    let inner = std::sync::Arc::new(port("w0"));
    let nic = FaultyNic::new(inner.clone(), Duration::from_millis(300));
    // atl1c's wiring: RX causes on the rx-imt vector only.
    assert_eq!(nic.default_vector(QueueId::rx(0)), RX_VECTOR);
    assert_eq!(nic.default_vector(QueueId::tx(0)), TX_VECTOR);
    assert!(matches!(
        nic.map_vector(QueueId::rx(0), TX_VECTOR),
        Err(NicError::OutOfRange { register: "interrupt cause routing", .. })
    ));
    // No pre-disable erratum, but queues it lacks are still refused.
    assert_eq!(nic.tx_pre_disable(0), Ok(()));
    assert!(matches!(nic.tx_pre_disable(1), Err(NicError::NoSuchQueue { count: 1, .. })));
    assert!(std::ptr::eq(nic.device().unwrap(), inner.device()));
}
