//! The machine: the ports netadm emulates and drives itself and the
//! datapath over them, the host's own ports the kernel drives (the kernel
//! wing), and the kernel mirror that gives IP interfaces their devices (a
//! TAP over netadm's links, the link's own device over the kernel's). It
//! is the pipeline's [`Backend`]: each step of a change is one wing's, in
//! the order the pipeline calls them.

use std::sync::Arc;

use netadm_datapath::Tx;
use netadm_model::{AddrObj, LinkName};

use crate::datapath::Datapath;
use crate::kernel::Kernel;
use crate::mirror::{LinkTx, Mirror};
use crate::pipeline::Backend;
use crate::ports::{Hardware, Ports};
use crate::timing::{Progress, Timing};
use crate::view::{Link, View};
use crate::{CoreError, PlanStep, Report};

/// How long `create-addr -T dhcp` waits for a lease before answering.
const DHCP_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The ports, the datapath and the kernel mirror.
pub(crate) struct Machine {
    /// The ports and the state of driving their rings.
    pub(crate) ports: Ports,
    /// What sends and receives over them.
    pub(crate) datapath: Datapath,
    /// The kernel mirror (IP interfaces' devices), when this netadmd has
    /// one.
    pub(crate) mirror: Option<Mirror>,
    /// The kernel ports and what is built over them, when there are any.
    pub(crate) kernel: Option<Kernel>,
}

impl Machine {
    /// The machine over the powered-on ports `hw` (the kernel's among
    /// them, `kernel`'s): the datapath started, and the kernel mirror
    /// opened when asked to (always where there are kernel ports: their
    /// IP interfaces are kernel devices).
    pub(crate) fn start(
        hw: Arc<Hardware>,
        kernel_mirror: bool,
        kernel: Option<Kernel>,
    ) -> Result<Self, CoreError> {
        let mirror = kernel_mirror || kernel.is_some();
        Ok(Self {
            datapath: Datapath::start(hw.clone())?,
            ports: Ports::new(hw.clone()),
            mirror: if mirror {
                Some(Mirror::open(hw.clone(), kernel.as_ref().map(Kernel::defaults))?)
            } else {
                None
            },
            kernel,
        })
    }

    /// The configuration netadmd started with is in place.
    pub(crate) fn started(&self) {
        if let Some(k) = &self.kernel {
            k.started();
        }
    }

    /// The ports.
    pub(crate) fn hw(&self) -> &Hardware {
        &self.ports.hw
    }

    /// After `create-addr` of kind `kind` made address object `addrobj`:
    /// a DHCP address waits for its lease (at most [`DHCP_WAIT`], outside
    /// the mutation lock), timed as a phase of its own; its client goes on
    /// trying after that.
    pub(crate) fn await_lease(&self, mut r: Report, addrobj: &str, kind: &str) -> Report {
        if kind == "dhcp"
            && let (Some(m), Ok(obj)) = (&self.mirror, addrobj.parse::<AddrObj>())
        {
            let start = std::time::Instant::now();
            let bound = m.wait_lease(&obj, start + DHCP_WAIT);
            let us = start.elapsed().as_micros() as u64;
            r.phases.push(("lease".into(), us));
            r.total_us += us;
            if !bound {
                r.notes.push(format!(
                    "{addrobj}: no DHCP lease within {} s; the client keeps trying",
                    DHCP_WAIT.as_secs()
                ));
            }
        }
        r
    }

    /// `refresh-if` of interface `n` under the running configuration `v`
    /// (held still by the caller).
    pub(crate) fn refresh_if(
        &self,
        v: &View<'_>,
        n: &LinkName,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        if !v.st.interface.contains_key(n) {
            return Err(CoreError::not_found(format!("IP interface {n} does not exist")));
        }
        let Some(m) = &self.mirror else {
            return Err(CoreError::not_supported(
                "this netadmd runs without a kernel mirror: there is no device to refresh",
            ));
        };
        // Over kernel links the interface is the link's device: it comes
        // back as the link says first.
        if let (Some(k), Some(l)) = (&self.kernel, v.resolve(n.as_str()))
            && k.owns(v, &l)
        {
            k.put_back(v, &l, t)?;
        }
        m.refresh(self, v, n, t)
    }

    /// After kernel ports' devices came or went: every kernel device the
    /// running configuration `v` asks for put in place again, and the IP
    /// interfaces whose devices were made anew configured on them.
    pub(crate) fn resync_kernel(&self, v: &View<'_>, t: &mut Timing) -> Result<(), CoreError> {
        let Some(k) = &self.kernel else { return Ok(()) };
        let res = k.readopt(v, t);
        if let Some(m) = &self.mirror {
            for n in v.st.interface.keys() {
                let Some(l) = v.resolve(n.as_str()) else { continue };
                let Some(key) = k.device_of(v, &l) else { continue };
                let now = k.index_of(&key);
                if now.is_some() && now != m.index_of(n) {
                    m.refresh(self, v, n, t)?;
                }
            }
        }
        res
    }

    /// What going from `cur` to `next` would do below the configuration:
    /// each port's rings, then the kernel's changes (an apply's plan).
    pub(crate) fn plan_steps(
        &self,
        cur: &netadm_config::LinkState,
        next: &netadm_config::LinkState,
    ) -> Result<Vec<PlanStep>, CoreError> {
        let mut steps = self.ports.plan_steps(cur, next)?;
        let (vf, vt) = (View { hw: self.hw(), st: cur }, View { hw: self.hw(), st: next });
        if let Some(k) = &self.kernel {
            steps.extend(k.plan_steps(&vf, &vt));
        }
        if self.mirror.is_some() {
            steps.extend(crate::mirror::plan_steps(&vf, &vt));
        }
        Ok(steps)
    }
}

impl LinkTx for Machine {
    fn link_tx(&self, v: &View<'_>, l: &Link) -> Option<(Arc<dyn Tx>, [u8; 6])> {
        self.datapath.link_tx(&self.ports, v, l)
    }

    fn kernel_device(&self, v: &View<'_>, l: &Link) -> Option<(Option<String>, String)> {
        self.kernel.as_ref().and_then(|k| k.device_of(v, l))
    }

    fn kernel_trouble(&self, v: &View<'_>, l: &Link) -> Option<String> {
        self.kernel.as_ref().and_then(|k| k.trouble(v, l))
    }

    fn link_qos(&self, v: &View<'_>, l: &Link) -> Arc<netadm_datapath::qos::LinkQos> {
        self.datapath.link_qos(v, l)
    }
}

impl Backend for Machine {
    fn hardware(&self) -> &Hardware {
        self.hw()
    }

    fn prepare(&self, next: &View<'_>) {
        // Its VLANs' frames are let in from the start; members an
        // aggregation is about to lose stop carrying its flows first.
        self.ports.sync_vlan_filters(next, true);
        self.datapath.presync(next);
    }

    fn shrink(&self, from: &View<'_>, to: &View<'_>) -> Result<bool, CoreError> {
        let ip = match &self.mirror {
            Some(m) => m.shrink(from, to)?,
            None => false,
        };
        let links = match &self.kernel {
            Some(k) => k.shrink(from, to)?,
            None => false,
        };
        Ok(ip || links)
    }

    fn unshrink(&self, from: &View<'_>, to: &View<'_>) {
        // The mirror's, by syncing back; the kernel links', device by
        // device.
        let _ = self.kernel(to, from, &mut Timing::new());
        if let Some(k) = &self.kernel
            && let Err(e) = k.unshrink(from, to)
        {
            tracing::warn!("putting back the kernel links' MTUs: {e}");
        }
    }

    fn drive(
        &self,
        from: &View<'_>,
        to: &View<'_>,
        t: &mut Timing,
        progress: Progress<'_>,
    ) -> Result<(), CoreError> {
        self.ports.execute(from.st, to.st, t, progress)?;
        if let Some(k) = &self.kernel
            && let Err(e) = k.drive(from, to, t)
        {
            // The kernel put itself back; so do the rings.
            let undo = self.ports.execute(to.st, from.st, &mut Timing::new(), &|_, _, _| {});
            return Err(match undo {
                Ok(()) => e,
                Err(u) => e.not_put_back(&u),
            });
        }
        Ok(())
    }

    fn kernel(&self, from: &View<'_>, to: &View<'_>, t: &mut Timing) -> Result<(), CoreError> {
        match &self.mirror {
            Some(m) => m.sync(self, from, to, t),
            None => {
                if from
                    .st
                    .interface
                    .diff(&to.st.interface)
                    .any(|(_, a, b)| a.is_none() && b.is_some())
                {
                    t.note("no kernel device was made: this netadmd runs without a kernel mirror");
                }
                Ok(())
            }
        }
    }

    fn verify(&self) -> Result<(), CoreError> {
        self.ports.verify()
    }

    fn restore(&self, st: &View<'_>) -> Result<(), CoreError> {
        self.ports.restore(st.st)
    }

    fn settle(&self, running: &View<'_>) {
        self.ports.sync_vlan_filters(running, false);
        self.datapath.sync(running);
    }
}
