//! Link aggregation settings: load-balancing policy and LACP.

use std::fmt;
use std::str::FromStr;

// The keywords of aggregations: hash layers, LACP mode and timer.
keywords! {
    /// One header layer an aggregation may hash on to pick an outbound port.
    pub enum AggrLayer parse "aggregation layer" {
        /// Source and destination MAC addresses.
        L2 = "L2",
        /// Source and destination IP addresses.
        L3 = "L3",
        /// Source and destination TCP/UDP ports.
        L4 = "L4",
    }

    /// LACP mode of an aggregation (dladm `-L`).
    #[derive(Default)]
    pub enum LacpMode parse "LACP mode" {
        /// No LACP: the aggregation is static (the default).
        #[default]
        Off = "off",
        /// Send LACPDUs unconditionally.
        Active = "active",
        /// Send LACPDUs only in reply to a partner.
        Passive = "passive",
    }

    /// LACP periodic timer (dladm `-T`).
    #[derive(Default)]
    pub enum LacpTimer parse "LACP timer" {
        /// Fast periodic rate, 1 s (the default, as in dladm).
        #[default]
        Short = "short",
        /// Slow periodic rate, 30 s.
        Long = "long",
    }
}

impl AggrLayer {
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Why a string is not a valid aggregation policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggrPolicyError {
    /// The policy string is empty.
    #[error("aggregation policy is empty: expected a comma-separated list of L2, L3, L4")]
    Empty,
    /// One comma-separated item is not a layer.
    #[error("aggregation policy {input:?}: {item:?} is not one of L2, L3, L4")]
    BadLayer {
        /// The whole rejected input.
        input: String,
        /// The offending item (may be empty, e.g. for "L2,,L3").
        item: String,
    },
}

/// An aggregation's outbound load-balancing policy (dladm `-P`): a non-empty
/// set of [`AggrLayer`]s whose headers are hashed together.
///
/// Parsed from a comma-separated list, case-insensitively ("L2", "l3,L4");
/// duplicates are merged. Displayed in canonical order, e.g. "L2,L3".
/// The default is `L4`, as in dladm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AggrPolicy(u8);

impl AggrPolicy {
    /// A policy hashing on a single layer.
    pub fn single(layer: AggrLayer) -> Self {
        Self(layer.bit())
    }

    /// A policy from any layers; `None` if `layers` is empty.
    pub fn from_layers(layers: impl IntoIterator<Item = AggrLayer>) -> Option<Self> {
        let bits = layers.into_iter().fold(0, |acc, l| acc | l.bit());
        (bits != 0).then_some(Self(bits))
    }

    /// Whether the policy hashes on `layer`.
    pub fn contains(self, layer: AggrLayer) -> bool {
        self.0 & layer.bit() != 0
    }

    /// The layers in canonical order (L2, L3, L4); never empty.
    pub fn layers(self) -> impl Iterator<Item = AggrLayer> {
        AggrLayer::ALL.into_iter().filter(move |&l| self.contains(l))
    }
}

impl Default for AggrPolicy {
    fn default() -> Self {
        Self::single(AggrLayer::L4)
    }
}

impl From<AggrLayer> for AggrPolicy {
    fn from(layer: AggrLayer) -> Self {
        Self::single(layer)
    }
}

impl FromStr for AggrPolicy {
    type Err = AggrPolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(AggrPolicyError::Empty);
        }
        let layers = s
            .split(',')
            .map(|item| {
                item.parse::<AggrLayer>().map_err(|_| AggrPolicyError::BadLayer {
                    input: s.to_owned(),
                    item: item.to_owned(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Non-empty input always yields at least one item, each a valid layer.
        Ok(Self::from_layers(layers).expect("non-empty"))
    }
}

impl fmt::Display for AggrPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s: Vec<&str> = self.layers().map(AggrLayer::as_str).collect();
        f.pad(&s.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AggrLayer::*;

    #[test]
    fn policy_parses_and_canonicalises() {
        let cases: &[(&str, &[AggrLayer], &str)] = &[
            ("L2", &[L2], "L2"),
            ("l3", &[L3], "L3"),
            ("L4", &[L4], "L4"),
            ("L3,L4", &[L3, L4], "L3,L4"),
            ("l2,l3", &[L2, L3], "L2,L3"),
            ("L4,L2", &[L2, L4], "L2,L4"),
            ("L2,l2", &[L2], "L2"),
            ("L4,L3,L2,L3", &[L2, L3, L4], "L2,L3,L4"),
        ];
        for &(input, layers, shown) in cases {
            let p: AggrPolicy = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(p.layers().collect::<Vec<_>>(), layers, "{input}");
            assert_eq!(p.to_string(), shown);
            assert_eq!(shown.parse::<AggrPolicy>().unwrap(), p);
            for l in AggrLayer::ALL {
                assert_eq!(p.contains(l), layers.contains(&l));
            }
        }
    }

    #[test]
    fn policy_rejects() {
        let s = |x: &str| x.to_owned();
        let cases = [
            ("", AggrPolicyError::Empty),
            ("L5", AggrPolicyError::BadLayer { input: s("L5"), item: s("L5") }),
            ("L2,,L3", AggrPolicyError::BadLayer { input: s("L2,,L3"), item: s("") }),
            ("L2,", AggrPolicyError::BadLayer { input: s("L2,"), item: s("") }),
            ("L2, L3", AggrPolicyError::BadLayer { input: s("L2, L3"), item: s(" L3") }),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<AggrPolicy>(), Err(want), "{input:?}");
        }
        assert_eq!(
            "L2,L5".parse::<AggrPolicy>().unwrap_err().to_string(),
            r#"aggregation policy "L2,L5": "L5" is not one of L2, L3, L4"#
        );
    }

    #[test]
    fn policy_constructors() {
        assert_eq!(AggrPolicy::default().to_string(), "L4");
        assert_eq!(AggrPolicy::from_layers([]), None);
        assert_eq!(AggrPolicy::from_layers([L3, L2]).unwrap().to_string(), "L2,L3");
        assert_eq!(AggrPolicy::from(L2), AggrPolicy::single(L2));
    }

    #[test]
    fn lacp_keywords() {
        for m in LacpMode::ALL {
            assert_eq!(m.to_string().parse::<LacpMode>().unwrap(), m);
        }
        for t in LacpTimer::ALL {
            assert_eq!(t.to_string().parse::<LacpTimer>().unwrap(), t);
        }
        assert_eq!("off".parse::<LacpMode>().unwrap(), LacpMode::Off);
        assert_eq!("Active".parse::<LacpMode>().unwrap(), LacpMode::Active);
        assert_eq!("passive".parse::<LacpMode>().unwrap(), LacpMode::Passive);
        assert_eq!("short".parse::<LacpTimer>().unwrap(), LacpTimer::Short);
        assert_eq!("LONG".parse::<LacpTimer>().unwrap(), LacpTimer::Long);
        assert_eq!(LacpMode::default(), LacpMode::Off);
        assert_eq!(LacpTimer::default(), LacpTimer::Short);
        assert_eq!(
            "on".parse::<LacpMode>().unwrap_err().to_string(),
            r#"LACP mode "on": expected one of off, active, passive"#
        );
        assert!("".parse::<LacpTimer>().is_err());
        assert!("medium".parse::<LacpTimer>().is_err());
    }
}
