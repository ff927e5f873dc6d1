//! Property-based state-machine test: random operation sequences against a
//! reference model of what each lifecycle operation must do.

mod common;

use std::sync::Arc;

use common::*;
use netadm_nic::{DmaRing, Nic};
use netadm_rings::{RingEngine, RingError, RingState};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Alloc(Vec<u16>, u32),
    Free(Vec<u16>),
    Start(Vec<u16>, u32),
    Stop(Vec<u16>),
    Restart(Vec<u16>, u32),
    Transmit(u16),
}

/// What a ring looks like between operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum M {
    Unallocated,
    Allocated(u32),
    Started(u32),
    Freed,
}

struct Model {
    rings: Vec<M>,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Illegal,
    Mismatch,
    NotStarted,
}

impl Model {
    fn apply(&mut self, op: &Op) -> Outcome {
        let uniq = |set: &[u16]| {
            let mut s = set.to_vec();
            s.sort();
            s.dedup();
            s
        };
        match op {
            Op::Alloc(set, b) => {
                let set = uniq(set);
                if set.iter().any(|&r| !matches!(self.rings[r as usize], M::Unallocated | M::Freed))
                {
                    return Outcome::Illegal;
                }
                set.iter().for_each(|&r| self.rings[r as usize] = M::Allocated(*b));
                Outcome::Ok
            }
            Op::Free(set) => {
                let set = uniq(set);
                if set.iter().any(|&r| matches!(self.rings[r as usize], M::Started(_))) {
                    return Outcome::Illegal;
                }
                for &r in &set {
                    if let M::Allocated(_) = self.rings[r as usize] {
                        self.rings[r as usize] = M::Freed;
                    }
                }
                Outcome::Ok
            }
            Op::Start(set, b) => {
                let set = uniq(set);
                if set.iter().any(|&r| matches!(self.rings[r as usize], M::Started(x) if x != *b)) {
                    return Outcome::Mismatch;
                }
                set.iter().for_each(|&r| self.rings[r as usize] = M::Started(*b));
                Outcome::Ok
            }
            Op::Stop(set) => {
                for r in uniq(set) {
                    if let M::Allocated(_) | M::Started(_) = self.rings[r as usize] {
                        self.rings[r as usize] = M::Freed;
                    }
                }
                Outcome::Ok
            }
            Op::Restart(set, b) => {
                self.apply(&Op::Stop(set.clone()));
                self.apply(&Op::Start(set.clone(), *b))
            }
            Op::Transmit(r) => match self.rings[*r as usize] {
                M::Started(_) => Outcome::Ok,
                _ => Outcome::NotStarted,
            },
        }
    }
}

fn outcome<T>(r: Result<T, RingError>) -> Outcome {
    match r {
        Ok(_) => Outcome::Ok,
        Err(RingError::IllegalTransition { .. }) => Outcome::Illegal,
        Err(RingError::BufferSizeMismatch { .. }) => Outcome::Mismatch,
        Err(RingError::NotStarted { .. }) => Outcome::NotStarted,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn ops(rings: u16) -> impl Strategy<Value = Vec<Op>> {
    let set = proptest::collection::vec(0..rings, 0..=rings as usize);
    let buf = prop_oneof![Just(1536u32), Just(4096u32)];
    let op = prop_oneof![
        1 => (set.clone(), buf.clone()).prop_map(|(s, b)| Op::Alloc(s, b)),
        1 => set.clone().prop_map(Op::Free),
        3 => (set.clone(), buf.clone()).prop_map(|(s, b)| Op::Start(s, b)),
        3 => set.clone().prop_map(Op::Stop),
        1 => (set, buf).prop_map(|(s, b)| Op::Restart(s, b)),
        1 => (0..rings).prop_map(Op::Transmit),
    ];
    proptest::collection::vec(op, 1..20)
}

fn run(nic: Arc<dyn Nic>, strategy: netadm_rings::Strategy, ops: &[Op]) {
    let e = RingEngine::new(nic.clone(), strategy).unwrap();
    let n = e.ring_count();
    let slots = nic.caps().ring_size;
    let mut model = Model { rings: vec![M::Unallocated; n as usize] };
    for op in ops {
        let got = match op {
            Op::Alloc(s, b) => outcome(e.alloc(s, *b)),
            Op::Free(s) => outcome(e.free(s)),
            Op::Start(s, b) => outcome(e.start(s, *b)),
            Op::Stop(s) => outcome(e.stop(s)),
            Op::Restart(s, b) => outcome(e.restart(s, *b)),
            Op::Transmit(r) => outcome(e.transmit(*r, &[&[7u8; 60]])),
        };
        let want = model.apply(op);
        assert_eq!(got, want, "{op:?}");
        let mut dma = 0;
        for r in 0..n {
            let info = e.info(r).unwrap();
            let (state, buf) = match model.rings[r as usize] {
                M::Unallocated => (RingState::Unallocated, None),
                M::Allocated(b) => (RingState::Allocated, Some(b)),
                M::Started(b) => (RingState::Started, Some(b)),
                M::Freed => (RingState::Freed, None),
            };
            assert_eq!((info.state, info.buf_size), (state, buf), "ring {r} after {op:?}");
            let queues = u64::from(info.txq.is_some()) + u64::from(info.rxq.is_some());
            dma += buf.map_or(0, |b| queues * DmaRing::bytes_for(slots, b));
        }
        assert_eq!(e.dma_bytes(), dma, "DMA accounting after {op:?}");
        assert_no_faults(&*nic);
    }
    e.stop(&e.all_rings()).unwrap();
    assert_eq!(e.dma_bytes(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn batched_i40e_matches_the_model(ops in ops(6)) {
        run(i40e_fast(6, Default::default()), netadm_rings::Strategy::Batched, &ops);
    }

    #[test]
    fn batched_atl1c_matches_the_model(ops in ops(1)) {
        run(atl1c(), netadm_rings::Strategy::Batched, &ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn sequential_i40e_matches_the_model(ops in ops(2)) {
        run(i40e_fast(2, Default::default()), netadm_rings::Strategy::Sequential, &ops);
    }
}
