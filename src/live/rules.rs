//! Per-route rules in the limits file: `[admit.default_rule]` and `[[admit.rule]]`, read into
//! a [`RoutesConfig`], planned at reload, and built into the tower layer's
//! [`Routes`](crate::tower::Routes) (with the feature `tower`).
//!
//! # What a reload may change, and why the rest is fixed
//!
//! The rules are read by every decision without a lock: each rule is published once, in a
//! slot of its own, and decisions try the slots in order up to the first one unset. So:
//!
//! * **Changed in place**: a rule's `weight`, `weight_min` and `weight_max`, and the default
//!   rule's `weight` (each a word the decision reads); and, as for any gate, the limits'
//!   rates, bursts, costs and shadow switches (a rule's gate charges the running limits).
//! * **Added**: new rules after the running ones, up to [`MAX_RULES`]. A request is tried
//!   against them after every running rule and before the default, as the file's order says.
//! * **Refused, naming the rule** (`admit.rule[2].prefix`): a rule removed (the file states
//!   fewer rules), moved (a rule at a running index with another method or path), or given
//!   another method, path, `limits` or `weight_header`; the default rule's `limits`; rules
//!   added to a file that had none, or all of them removed. A published rule is never
//!   unpublished, so a decision never sees a list half reordered; what a rule's requests pay
//!   is its gate, built once over its limits. Tokens are counted per limit, not per rule, so
//!   none of this loses a count: moving requests to other limits is a restart. A new rule
//!   that charges a limit by outcome, or keys the source's prefix, when no running rule
//!   does is refused too: the layer was built without reading what it needs.
//!
//! Like every reload, all or nothing: the rules are planned with the limits, a refusal
//! changes nothing, and new rules are published last, once every other change is made.

use super::parse::Section;
use super::{GateLimit, KeyProblem, LimitsConfigError};
use crate::gate::KeyKind;
use toml::Value;

type Result<T> = std::result::Result<T, LimitsConfigError>;

/// The most `[[admit.rule]]`s a file states (and a reload grows the rules to): each is a slot
/// a decision may read, set once.
pub const MAX_RULES: usize = 64;

const RULE_KEYS: &[&str] = &[
    "method",
    "exact",
    "route",
    "prefix",
    "limits",
    "weight",
    "weight_header",
    "weight_min",
    "weight_max",
];
const DEFAULT_RULE_KEYS: &[&str] = &["limits", "weight"];

/// `[admit.default_rule]` and `[[admit.rule]]`: the per-route rules of a layer, each a path
/// and the limits it charges (see `LiveLimits::routes`, feature `tower`).
///
/// ```
/// use admit::live::{LimitsConfig, RulePath};
///
/// let config = LimitsConfig::from_toml_str(r#"
/// [[admit.limit]]
/// name = "per source"
/// key = "source"
/// rate = "10/s"
/// burst = 20
///
/// [[admit.limit]]
/// name = "logins"
/// key = "source"
/// rate = "5/min"
/// burst = 5
///
/// [admit.default_rule]
/// limits = ["per source"]
///
/// [[admit.rule]]
/// method = "POST"
/// exact = "/login"
/// limits = ["per source", "logins"]
/// "#)?;
/// let routes = config.routes.expect("the file states rules");
/// assert_eq!(routes.default.limits, ["per source"]);
/// assert_eq!(routes.rules[0].path, RulePath::Exact("/login".into()));
/// # Ok::<(), admit::live::LimitsConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutesConfig {
    /// `[admit.default_rule]`: what every request no rule matches pays (required with
    /// rules: no route is silently unlimited).
    pub default: RuleConfig,
    /// `[[admit.rule]]`, in the order a request is tried against them.
    pub rules: Vec<RuleConfig>,
}

/// One rule of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleConfig {
    /// `method`: only requests of this method (a `"GET"` rule also matches `HEAD`); any
    /// method if absent.
    pub method: Option<String>,
    /// `exact`, `route` or `prefix`: which paths; [`RulePath::Default`] for the default rule.
    pub path: RulePath,
    /// `limits`: the `[[admit.limit]]`s the rule charges, by name. Its gate charges them in
    /// the file's `[[admit.limit]]` order, whatever the order here, with the in-flight and
    /// volume quotas if the file states them.
    pub limits: Vec<String>,
    /// `weight`: what the rule's `cost = "weight"` limits charge (each at least its `min`),
    /// 1 if absent.
    pub weight: u32,
    /// `weight_header` with `weight_min` and `weight_max`: each request's weight read from a
    /// header a trusted proxy set.
    pub weight_header: Option<WeightHeader>,
}

/// Which paths a rule matches (see `tower::Rule`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulePath {
    /// The default rule: every request no rule matches.
    Default,
    /// `exact = "/login"`: that path, byte for byte.
    Exact(String),
    /// `route = "/users/{id}"`: the paths axum routes to that route.
    Route(String),
    /// `prefix = "/api"`: the path and every path under it.
    Prefix(String),
}

/// `weight_header`, `weight_min` and `weight_max`: a request's weight read from a header,
/// believed only from a trusted proxy, held to `min..=max`; the rule's `weight` otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightHeader {
    /// The header's name, lowercase.
    pub name: String,
    /// `weight_min`: the least weight (1 if absent; at least 1).
    pub min: u32,
    /// `weight_max`: the most (required).
    pub max: u32,
}

/// The path of the `i`-th `[[admit.rule]]`.
pub(super) fn rule_key(i: usize) -> String {
    format!("admit.rule[{i}]")
}

const DEFAULT_KEY: &str = "admit.default_rule";

/// The rules of the `[admit]` table, if it states any; `limits` are its `[[admit.limit]]`s,
/// and `quotas` whether it states an in-flight or a volume quota (which every rule charges).
pub(super) fn read_routes(
    admit: &Section<'_>,
    limits: &[GateLimit],
    quotas: bool,
) -> Result<Option<RoutesConfig>> {
    let default = admit.table("default_rule")?;
    let rules = admit.get("rule");
    let Some(default) = default else {
        return match rules {
            None => Ok(None),
            Some(_) => Err(LimitsConfigError::at(
                DEFAULT_KEY,
                KeyProblem::NoDefaultRule,
            )),
        };
    };
    default.only(DEFAULT_RULE_KEYS)?;
    let default = RuleConfig {
        method: None,
        path: RulePath::Default,
        limits: read_rule_limits(&default, limits, quotas)?,
        weight: read_weight(&default)?,
        weight_header: None,
    };
    let rules: &[Value] = match rules {
        None => &[],
        Some(Value::Array(rules)) => rules.as_slice(),
        Some(other) => {
            return Err(LimitsConfigError::at(
                admit.child("rule"),
                KeyProblem::WrongType {
                    expected: "an array of tables, one [[admit.rule]] per rule",
                    found: other.type_str(),
                },
            ))
        }
    };
    let rules = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            if i >= MAX_RULES {
                return Err(LimitsConfigError::at(
                    rule_key(i),
                    KeyProblem::TooManyRules { max: MAX_RULES },
                ));
            }
            read_rule(&Section::of(rule_key(i), rule)?, limits, quotas)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(RoutesConfig { default, rules }))
}

fn read_rule(rule: &Section<'_>, limits: &[GateLimit], quotas: bool) -> Result<RuleConfig> {
    rule.only(RULE_KEYS)?;
    let method = match rule.string("method", "a method in quotes, as \"POST\"")? {
        None => None,
        Some(method) => {
            let token = !method.is_empty()
                && method
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "-_".contains(c));
            if !token {
                return Err(LimitsConfigError::at(
                    rule.child("method"),
                    KeyProblem::NotAMethod {
                        value: method.to_owned(),
                    },
                ));
            }
            Some(method.to_owned())
        }
    };
    let mut paths = Vec::new();
    for key in ["exact", "route", "prefix"] {
        if let Some(path) = rule.string(key, "a path in quotes, as \"/login\"")? {
            if !path.starts_with('/') {
                return Err(LimitsConfigError::at(
                    rule.child(key),
                    KeyProblem::NotAPath {
                        value: path.to_owned(),
                    },
                ));
            }
            paths.push(match key {
                "exact" => RulePath::Exact(path.to_owned()),
                "route" => RulePath::Route(path.to_owned()),
                _ => RulePath::Prefix(path.to_owned()),
            });
        }
    }
    let path = match <[RulePath; 1]>::try_from(paths) {
        Ok([path]) => path,
        Err(_) => {
            return Err(LimitsConfigError::at(
                rule.path.clone(),
                KeyProblem::RulePath,
            ))
        }
    };
    let weight = read_weight(rule)?;
    let bound = |key| {
        rule.uint(key, u64::from(u32::MAX))
            .map(|n| n.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
    };
    let (min, max) = (bound("weight_min")?, bound("weight_max")?);
    let weight_header = match rule.string("weight_header", "a header name in quotes")? {
        None => {
            if let Some(key) = [("weight_min", min), ("weight_max", max)]
                .iter()
                .find_map(|(key, bound)| bound.map(|_| *key))
            {
                return Err(LimitsConfigError::at(
                    rule.child(key),
                    KeyProblem::BoundsWithoutHeader,
                ));
            }
            None
        }
        Some(name) => {
            let token = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
            if !token {
                return Err(LimitsConfigError::at(
                    rule.child("weight_header"),
                    KeyProblem::NotAHeader {
                        value: name.to_owned(),
                    },
                ));
            }
            let max = max.ok_or_else(|| {
                LimitsConfigError::at(rule.child("weight_max"), KeyProblem::Missing)
            })?;
            let min = min.unwrap_or(1);
            let key = match (min, max) {
                (0, _) | (_, 0) => Some("weight_min"),
                (min, max) if min > max => Some("weight_max"),
                (min, max) if !(min..=max).contains(&weight) => Some("weight"),
                _ => None,
            };
            if let Some(key) = key {
                return Err(LimitsConfigError::at(
                    rule.child(key),
                    KeyProblem::WeightBounds { weight, min, max },
                ));
            }
            Some(WeightHeader {
                name: name.to_ascii_lowercase(),
                min,
                max,
            })
        }
    };
    Ok(RuleConfig {
        method,
        path,
        limits: read_rule_limits(rule, limits, quotas)?,
        weight,
        weight_header,
    })
}

fn read_weight(rule: &Section<'_>) -> Result<u32> {
    Ok(rule
        .uint("weight", u64::from(u32::MAX))?
        .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)))
}

/// `limits`: names of `[[admit.limit]]`s, each once; none only if the file states a quota
/// every rule charges.
fn read_rule_limits(rule: &Section<'_>, limits: &[GateLimit], quotas: bool) -> Result<Vec<String>> {
    let key = rule.child("limits");
    let names = match rule.get("limits") {
        None => return Err(LimitsConfigError::at(key, KeyProblem::Missing)),
        Some(Value::Array(names)) => names,
        Some(other) => {
            return Err(LimitsConfigError::at(
                key,
                KeyProblem::WrongType {
                    expected: "an array of [[admit.limit]] names, as [\"per source\"]",
                    found: other.type_str(),
                },
            ))
        }
    };
    let mut read: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let Value::String(name) = name else {
            return Err(LimitsConfigError::at(
                key,
                KeyProblem::WrongType {
                    expected: "an array of [[admit.limit]] names, as [\"per source\"]",
                    found: name.type_str(),
                },
            ));
        };
        if !limits.iter().any(|limit| &limit.name == name) || read.contains(name) {
            return Err(LimitsConfigError::at(
                key,
                KeyProblem::NotALimit {
                    name: name.clone(),
                    repeated: read.contains(name),
                },
            ));
        }
        read.push(name.clone());
    }
    if read.is_empty() && !quotas {
        return Err(LimitsConfigError::at(key, KeyProblem::RuleNoDefence));
    }
    Ok(read)
}

/// A rule's weight and bounds a reload changes (`None`: the default rule's).
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(super) struct WeightChange {
    pub(super) rule: Option<usize>,
    pub(super) old: (u32, u32, u32),
    pub(super) new: (u32, u32, u32),
}

/// A rule's weight and its header weight's bounds (its weight twice without a header).
fn weights(rule: &RuleConfig) -> (u32, u32, u32) {
    match &rule.weight_header {
        Some(header) => (rule.weight, header.min, header.max),
        None => (rule.weight, rule.weight, rule.weight),
    }
}

/// The check pass for the rules: the weights a reload changes and how many rules it adds, or
/// the first refusal, naming the rule. `limits` are the file's (the running ones' names and
/// key kinds, which the limits' own plan checks).
pub(super) fn plan_routes(
    running: Option<&RoutesConfig>,
    file: Option<&RoutesConfig>,
    limits: &[GateLimit],
) -> Result<(Vec<WeightChange>, usize)> {
    let (running, file) = match (running, file) {
        (None, None) => return Ok((Vec::new(), 0)),
        (Some(_), None) => return Err(LimitsConfigError::at(DEFAULT_KEY, KeyProblem::Missing)),
        (None, Some(_)) => return Err(LimitsConfigError::at(DEFAULT_KEY, KeyProblem::NotRunning)),
        (Some(running), Some(file)) => (running, file),
    };
    let mut changes = Vec::new();
    let fixed = |key: String, running: String, found: String| {
        LimitsConfigError::at(key, KeyProblem::RuleFixed { running, found })
    };
    let same_limits = |a: &RuleConfig, b: &RuleConfig| {
        a.limits.len() == b.limits.len() && a.limits.iter().all(|name| b.limits.contains(name))
    };
    if !same_limits(&running.default, &file.default) {
        return Err(fixed(
            format!("{DEFAULT_KEY}.limits"),
            format!("{:?}", running.default.limits),
            format!("{:?}", file.default.limits),
        ));
    }
    if running.default.weight != file.default.weight {
        changes.push(WeightChange {
            rule: None,
            old: weights(&running.default),
            new: weights(&file.default),
        });
    }
    if let Some(removed) = running.rules.get(file.rules.len()) {
        return Err(fixed(
            rule_key(file.rules.len()),
            describe(removed),
            "no rule".to_owned(),
        ));
    }
    for (i, (old, new)) in running.rules.iter().zip(&file.rules).enumerate() {
        let key = rule_key(i);
        if old.path != new.path || old.method != new.method {
            return Err(fixed(key, describe(old), describe(new)));
        }
        if !same_limits(old, new) {
            return Err(fixed(
                format!("{key}.limits"),
                format!("{:?}", old.limits),
                format!("{:?}", new.limits),
            ));
        }
        let header = |rule: &RuleConfig| rule.weight_header.as_ref().map(|h| h.name.clone());
        if header(old) != header(new) {
            return Err(fixed(
                format!("{key}.weight_header"),
                format!("{:?}", header(old)),
                format!("{:?}", header(new)),
            ));
        }
        if weights(old) != weights(new) {
            changes.push(WeightChange {
                rule: Some(i),
                old: weights(old),
                new: weights(new),
            });
        }
    }
    // What the layer was built to read: limits charged by outcome, the source's prefix.
    let charges = |rule: &RuleConfig, what: &dyn Fn(&GateLimit) -> bool| {
        limits
            .iter()
            .any(|limit| what(limit) && rule.limits.contains(&limit.name))
    };
    let outcome = |limit: &GateLimit| limit.outcome;
    let prefix = |limit: &GateLimit| limit.key == KeyKind::SourcePrefix;
    let running_all = || std::iter::once(&running.default).chain(&running.rules);
    for (i, new) in file.rules.iter().enumerate().skip(running.rules.len()) {
        for (what, needs) in [
            (
                &outcome as &dyn Fn(&GateLimit) -> bool,
                "charge_outcome_when",
            ),
            (&prefix, "source_prefix"),
        ] {
            if charges(new, what) && !running_all().any(|rule| charges(rule, what)) {
                return Err(LimitsConfigError::at(
                    format!("{}.limits", rule_key(i)),
                    KeyProblem::RuleNeedsLayer { setting: needs },
                ));
            }
        }
    }
    Ok((changes, file.rules.len() - running.rules.len()))
}

/// A rule as the file writes its method and path.
fn describe(rule: &RuleConfig) -> String {
    let path = match &rule.path {
        RulePath::Default => "the default rule".to_owned(),
        RulePath::Exact(path) => format!("exact = {path:?}"),
        RulePath::Route(path) => format!("route = {path:?}"),
        RulePath::Prefix(path) => format!("prefix = {path:?}"),
    };
    match &rule.method {
        Some(method) => format!("method = {method:?}, {path}"),
        None => path,
    }
}

#[cfg(feature = "tower")]
pub(super) use built::LiveRoutes;

/// The rules built into a layer's [`Routes`](crate::tower::Routes).
#[cfg(feature = "tower")]
mod built {
    use super::{rule_key, RuleConfig, RulePath, WeightChange, DEFAULT_KEY, MAX_RULES};
    use crate::clock::Clock;
    use crate::gate::Gate;
    use crate::live::{KeyProblem, LimitsConfigError};
    use crate::tower::routes::{Routed, RuleSlots};
    use crate::tower::{ClientIp, Routes, Rule, RuleId};
    use http::{HeaderName, Method};
    use std::sync::Arc;

    type Result<T> = std::result::Result<T, LimitsConfigError>;

    /// The rules every [`Routes`] a [`LiveLimits`](crate::live::LiveLimits) built shares: a
    /// reload changes their weights and appends to them.
    pub(in crate::live) struct LiveRoutes<C: Clock + 'static> {
        default: Routed<C>,
        slots: Arc<RuleSlots<C>>,
        trust: Option<ClientIp>,
    }

    impl<C: Clock + 'static> LiveRoutes<C> {
        /// The default rule through `default`, no rule yet.
        pub(in crate::live) fn new(
            config: &RuleConfig,
            default: Gate<C>,
            trust: Option<&ClientIp>,
        ) -> Result<Self> {
            let rule = Rule::prefix("/").weight(config.weight);
            let default =
                Routed::shared(Arc::new(default), &rule, RuleId::Default).map_err(|refused| {
                    LimitsConfigError::at(DEFAULT_KEY, KeyProblem::Rule(refused.why))
                })?;
            Ok(Self {
                default,
                slots: Arc::new(RuleSlots::new(MAX_RULES)),
                trust: trust.cloned(),
            })
        }

        /// A layer's rules: these.
        pub(in crate::live) fn routes(&self) -> Routes<C> {
            Routes::live(self.default.clone(), Arc::clone(&self.slots))
        }

        /// Rule `i` as the file states it, through `gate`, unpublished; refused, naming it,
        /// for a header weight without the trusted proxies to believe it from, or a gate the
        /// layer would refuse.
        pub(in crate::live) fn build(
            &self,
            i: usize,
            config: &RuleConfig,
            gate: Gate<C>,
        ) -> Result<(Rule, Routed<C>)> {
            let key = rule_key(i);
            let mut rule = match &config.path {
                RulePath::Default => {
                    return Err(LimitsConfigError::at(key, KeyProblem::RulePath));
                }
                RulePath::Prefix(path) => Rule::prefix(path),
                RulePath::Exact(path) => Rule::exact(path.as_str()),
                RulePath::Route(path) => Rule::route(path),
            };
            if let Some(method) = &config.method {
                let method = Method::from_bytes(method.as_bytes()).map_err(|_| {
                    LimitsConfigError::at(
                        format!("{key}.method"),
                        KeyProblem::NotAMethod {
                            value: method.clone(),
                        },
                    )
                })?;
                rule = rule.method(method);
            }
            rule = rule.weight(config.weight);
            if let Some(header) = &config.weight_header {
                let at = || format!("{key}.weight_header");
                let trust = self
                    .trust
                    .as_ref()
                    .ok_or_else(|| LimitsConfigError::at(at(), KeyProblem::NoTrustedProxies))?;
                let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|_| {
                    LimitsConfigError::at(
                        at(),
                        KeyProblem::NotAHeader {
                            value: header.name.clone(),
                        },
                    )
                })?;
                rule = rule.weight_from_header(name, trust, header.min..=header.max);
            }
            let routed = Routed::shared(Arc::new(gate), &rule, RuleId::Rule(i))
                .map_err(|refused| LimitsConfigError::at(key, KeyProblem::Rule(refused.why)))?;
            Ok((rule, routed))
        }

        /// Whether rule `i` as the file states it can be built (before a reload changes
        /// anything): a header weight needs the trusted proxies.
        pub(in crate::live) fn check(&self, i: usize, config: &RuleConfig) -> Result<()> {
            match (&config.weight_header, &self.trust) {
                (Some(_), None) => Err(LimitsConfigError::at(
                    format!("{}.weight_header", rule_key(i)),
                    KeyProblem::NoTrustedProxies,
                )),
                _ => Ok(()),
            }
        }

        /// Publishes rule `i`: decisions try it from now on. `false` if it was already.
        pub(in crate::live) fn publish(&self, i: usize, rule: Rule, routed: Routed<C>) -> bool {
            self.slots.set(i, rule, routed)
        }

        /// Makes `change` (its new values, or back to its old ones).
        pub(in crate::live) fn set_weight(&self, change: &WeightChange, new: bool) {
            let (weight, min, max) = if new { change.new } else { change.old };
            let routed = match change.rule {
                None => Some(&self.default),
                Some(i) => self.slots.get(i).map(|(_, routed)| routed),
            };
            if let Some(routed) = routed {
                routed.set_weight(weight, min, max);
            }
        }
    }
}
