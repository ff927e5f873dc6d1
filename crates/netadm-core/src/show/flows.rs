//! What `show-flow`, `show-flowprop` and `flowstat` say of the flows:
//! their attributes and properties as configured, and what each carried
//! on the datapath.

use netadm_config::FlowConf;
use netadm_model::{FlowName, PRIORITIES, PropName};

use super::Reads;

use crate::datapath::qos::FLOW_PRIORITY;
use crate::verbs::flows::{FLOW_PROPS, flow_name, flow_prop};
use crate::{CoreError, FlowPropRow, FlowRow, FlowStatsRow};

impl Reads<'_> {
    /// The flows named `flow` (every one when empty) on link `link` (any
    /// when empty); a flow or link named that has none is NotFound.
    fn flows(&self, flow: &str, link: &str) -> Result<Vec<(FlowName, FlowConf)>, CoreError> {
        let st = &self.running;
        let picked: Vec<(FlowName, FlowConf)> = if flow.is_empty() {
            st.flow.iter().map(|(n, c)| (n.clone(), c.clone())).collect()
        } else {
            let n = flow_name(flow)?;
            let c = st
                .flow
                .get(&n)
                .ok_or_else(|| CoreError::not_found(format!("flow {n} does not exist")))?;
            vec![(n, c.clone())]
        };
        if link.is_empty() {
            return Ok(picked);
        }
        self.running_view().require(link)?;
        Ok(picked.into_iter().filter(|(_, c)| c.link.as_str() == link).collect())
    }

    /// `show-flow`.
    pub(crate) fn show_flow(&self, flow: &str, link: &str) -> Result<Vec<FlowRow>, CoreError> {
        let text = |v: Option<String>| v.unwrap_or_default();
        Ok(self
            .flows(flow, link)?
            .into_iter()
            .map(|(n, c)| {
                let a = &c.attrs;
                FlowRow {
                    flow: n.to_string(),
                    link: c.link.to_string(),
                    transport: text(a.transport.map(|t| t.to_string())),
                    local_ip: text(a.local_ip.map(|p| p.to_string())),
                    remote_ip: text(a.remote_ip.map(|p| p.to_string())),
                    local_port: text(a.local_port.map(|p| p.to_string())),
                    remote_port: text(a.remote_port.map(|p| p.to_string())),
                    dsfield: text(a.dsfield.map(|d| d.to_string())),
                }
            })
            .collect())
    }

    /// `show-flowprop`.
    pub(crate) fn show_flow_prop(
        &self,
        flow: &str,
        link: &str,
        names: &[String],
    ) -> Result<Vec<FlowPropRow>, CoreError> {
        let names: Vec<PropName> = names.iter().map(|n| flow_prop(n)).collect::<Result<_, _>>()?;
        let mut out = vec![];
        for (n, c) in self.flows(flow, link)? {
            for p in FLOW_PROPS.into_iter().filter(|p| names.is_empty() || names.contains(p)) {
                let default = match p {
                    PropName::Priority => PRIORITIES[FLOW_PRIORITY].to_owned(),
                    _ => "--".to_owned(),
                };
                let value = c.props.get(&p).map_or_else(
                    || if p == PropName::Priority { default.clone() } else { "--".into() },
                    ToString::to_string,
                );
                out.push(FlowPropRow {
                    flow: n.to_string(),
                    property: p.to_string(),
                    value,
                    default,
                    possible: p.spec().possible(),
                });
            }
        }
        Ok(out)
    }

    /// `flowstat`: what each flow carried since it was added, and what
    /// its limits dropped: on the datapath (since netadmd started), or,
    /// for a kernel flow, what its class sent and its rules let in or
    /// dropped on arrival (since they were made).
    pub(crate) fn show_flow_stats(&self) -> Vec<FlowStatsRow> {
        let mut counts = self.m.datapath.flow_counts();
        if let Some(k) = &self.m.kernel {
            counts.extend(k.flow_counts());
        }
        self.running
            .flow
            .iter()
            .map(|(n, c)| {
                let k = counts.get(n).copied().unwrap_or_default();
                FlowStatsRow {
                    flow: n.to_string(),
                    link: c.link.to_string(),
                    ipackets: k.ipackets,
                    rbytes: k.rbytes,
                    idrops: k.idrops,
                    opackets: k.opackets,
                    obytes: k.obytes,
                    odrops: k.odrops,
                }
            })
            .collect()
    }
}
