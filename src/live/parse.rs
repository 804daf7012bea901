//! Reading an `[admit]` table into a [`LimitsConfig`], every key by hand, so that each bad key
//! or value becomes a [`LimitsConfigError`] naming it.

use super::values::{parse_duration, parse_rate};
use super::{
    BucketLimits, ClassLimits, GateLimit, InFlightLimits, KeyProblem, LimiterLimits, LimitsConfig,
    LimitsConfigError, VolumeLimits,
};
use crate::bucket::{BucketConfig, BucketConfigError};
use crate::fairness::{
    AdaptiveTotal, AdaptiveTotalError, Priority, QuotasConfigError, Shares, DEFAULT_ACTORS,
    DEFAULT_OVERRIDE_CAPACITY, MAX_TOTAL_LIMIT, UNLIMITED,
};
use crate::gate::{Cost, GateConfigError, KeyKind, MAX_LIMITS};
use crate::limiter::DEFAULT_CAP;
use crate::quota::{Quota, RateLimitConfigError};
use std::collections::BTreeMap;
use toml::{Table, Value};

type Result<T> = std::result::Result<T, LimitsConfigError>;

const ADMIT_KEYS: &[&str] = &[
    "limiter",
    "limit",
    "in_flight",
    "volume",
    "bucket",
    "default_rule",
    "rule",
];
const LIMITER_KEYS: &[&str] = &["cap", "class"];
const CLASS_KEYS: &[&str] = &["burst", "rate", "interval", "shadow"];
const LIMIT_KEYS: &[&str] = &[
    "name", "key", "burst", "rate", "interval", "cost", "min", "shadow", "outcome",
];
const IN_FLIGHT_KEYS: &[&str] = &[
    "quota",
    "actors",
    "override_capacity",
    "overrides",
    "shadow",
    "key",
    "total",
];
const TOTAL_KEYS: &[&str] = &[
    "target",
    "floor",
    "ceiling",
    "initial",
    "normal",
    "sheddable",
];
const VOLUME_KEYS: &[&str] = &["events", "bytes", "window", "rows", "shadow", "key"];
const BUCKET_KEYS: &[&str] = &["burst", "rate", "interval", "shadow"];

/// Parses a whole document and reads its `[admit]` table (an empty config if it has none).
/// Every other top-level table is left alone: the file may be shared.
pub(super) fn parse_document(document: &str) -> Result<LimitsConfig> {
    let root: Table =
        document
            .parse()
            .map_err(|err: toml::de::Error| LimitsConfigError::Syntax {
                message: err.to_string(),
            })?;
    match root.get("admit") {
        None => Ok(LimitsConfig::default()),
        Some(admit) => read_admit(&Section::of("admit".to_owned(), admit)?),
    }
}

fn read_admit(admit: &Section<'_>) -> Result<LimitsConfig> {
    admit.only(ADMIT_KEYS)?;
    let (limits, classes) = match admit.get("limit") {
        None => (Vec::new(), None),
        Some(limits) => {
            let (limits, classes) = read_limits(&admit.child("limit"), limits)?;
            (limits, Some(classes))
        }
    };
    let limiter = match (admit.table("limiter")?, classes) {
        (Some(limiter), classes) => Some(read_limiter(&limiter, classes)?),
        (None, Some(classes)) => Some(LimiterLimits {
            cap: DEFAULT_CAP,
            classes,
        }),
        (None, None) => None,
    };
    let in_flight = admit
        .table("in_flight")?
        .map(|s| read_in_flight(&s))
        .transpose()?;
    let volume = admit
        .table("volume")?
        .map(|s| read_volume(&s))
        .transpose()?;
    let quotas = in_flight.is_some() || volume.is_some();
    Ok(LimitsConfig {
        limiter,
        routes: super::rules::read_routes(admit, &limits, quotas)?,
        limits,
        in_flight,
        volume,
        bucket: admit
            .table("bucket")?
            .map(|s| read_bucket(&s))
            .transpose()?,
    })
}

/// `[admit.limiter]`: the cap, and the classes, given here or (`from_limits`) by the
/// `[[admit.limit]]`s, never both.
fn read_limiter(
    limiter: &Section<'_>,
    from_limits: Option<Vec<ClassLimits>>,
) -> Result<LimiterLimits> {
    limiter.only(LIMITER_KEYS)?;
    let cap = match limiter.uint("cap", u64::MAX)? {
        None => DEFAULT_CAP,
        Some(cap) => usize::try_from(cap).unwrap_or(usize::MAX),
    };
    if let Some(classes) = from_limits {
        return match limiter.get("class") {
            Some(_) => Err(LimitsConfigError::at(
                limiter.child("class"),
                KeyProblem::ClassesAndLimits,
            )),
            None => Ok(LimiterLimits { cap, classes }),
        };
    }
    let Some(classes) = limiter.get("class") else {
        return Err(LimitsConfigError::at(
            limiter.child("class"),
            KeyProblem::Missing,
        ));
    };
    let Value::Array(classes) = classes else {
        return Err(LimitsConfigError::at(
            limiter.child("class"),
            KeyProblem::WrongType {
                expected: "an array of tables, one [[admit.limiter.class]] per class",
                found: classes.type_str(),
            },
        ));
    };
    let classes = classes
        .iter()
        .enumerate()
        .map(|(i, class)| {
            read_class(&Section::of(
                format!("{}[{i}]", limiter.child("class")),
                class,
            )?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LimiterLimits { cap, classes })
}

/// `[[admit.limit]]` (at `path`): the limits, and their rates as the limiter's classes.
fn read_limits(path: &str, limits: &Value) -> Result<(Vec<GateLimit>, Vec<ClassLimits>)> {
    let limits = match limits {
        Value::Array(limits) if !limits.is_empty() => limits,
        other => {
            return Err(LimitsConfigError::at(
                path,
                KeyProblem::WrongType {
                    expected: "an array of tables, one [[admit.limit]] per limit",
                    found: other.type_str(),
                },
            ))
        }
    };
    if limits.len() > MAX_LIMITS {
        return Err(LimitsConfigError::at(
            path,
            KeyProblem::Gate(GateConfigError::TooManyLimits {
                limits: limits.len(),
                max: MAX_LIMITS,
            }),
        ));
    }
    let mut read: Vec<GateLimit> = Vec::with_capacity(limits.len());
    let mut classes = Vec::with_capacity(limits.len());
    for (i, limit) in limits.iter().enumerate() {
        let section = Section::of(limit_key(i), limit)?;
        let (limit, class) = read_limit(&section)?;
        if read.iter().any(|earlier| earlier.name == limit.name) {
            return Err(LimitsConfigError::at(
                section.child("name"),
                KeyProblem::Gate(GateConfigError::DuplicateName {
                    limit: limit.name.as_str().into(),
                }),
            ));
        }
        read.push(limit);
        classes.push(class);
    }
    Ok((read, classes))
}

/// The path of the `i`-th `[[admit.limit]]`.
pub(super) fn limit_key(i: usize) -> String {
    format!("admit.limit[{i}]")
}

/// One `[[admit.limit]]`: its name, key and cost, and its rate as a class.
fn read_limit(limit: &Section<'_>) -> Result<(GateLimit, ClassLimits)> {
    limit.only(LIMIT_KEYS)?;
    let name = limit
        .string("name", "a name in quotes, as \"per source\"")?
        .ok_or_else(|| LimitsConfigError::at(limit.child("name"), KeyProblem::Missing))?;
    if name.is_empty() {
        return Err(LimitsConfigError::at(
            limit.child("name"),
            KeyProblem::WrongType {
                expected: "a name of at least one character",
                found: "empty string",
            },
        ));
    }
    let key = read_key_kind(limit)?
        .ok_or_else(|| LimitsConfigError::at(limit.child("key"), KeyProblem::Missing))?;
    let min = limit
        .uint("min", u64::from(u32::MAX))?
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let (cost, cost_key) = match limit.get("cost") {
        Some(Value::String(text)) if text == "weight" => (
            Cost::Weight {
                min: min.unwrap_or(1),
            },
            "min",
        ),
        Some(Value::String(_)) => {
            return Err(LimitsConfigError::at(
                limit.child("cost"),
                KeyProblem::WrongType {
                    expected: "a whole number of tokens, or \"weight\"",
                    found: "string other than \"weight\"",
                },
            ))
        }
        _ => {
            if min.is_some() {
                return Err(LimitsConfigError::at(
                    limit.child("min"),
                    KeyProblem::MinWithoutWeight,
                ));
            }
            let tokens = limit
                .uint("cost", u64::from(u32::MAX))?
                .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX));
            (Cost::Tokens(tokens), "cost")
        }
    };
    let class = read_class_keys(limit)?;
    let (Cost::Tokens(n) | Cost::Weight { min: n }) = cost;
    if n > class.config.burst() {
        return Err(LimitsConfigError::at(
            limit.child(cost_key),
            KeyProblem::Gate(GateConfigError::CostExceedsBurst {
                limit: name.into(),
                cost: n,
                burst: class.config.burst(),
            }),
        ));
    }
    let limit = GateLimit {
        name: name.to_owned(),
        key,
        cost,
        outcome: limit.flag("outcome")?,
    };
    Ok((limit, class))
}

/// `key`: `"claim"`, `"source"` or `"source-prefix"`; `None` if absent.
fn read_key_kind(section: &Section<'_>) -> Result<Option<KeyKind>> {
    let Some(text) = section.string("key", "\"claim\", \"source\" or \"source-prefix\"")? else {
        return Ok(None);
    };
    match text {
        "claim" => Ok(Some(KeyKind::Claim)),
        "source" => Ok(Some(KeyKind::Source)),
        "source-prefix" => Ok(Some(KeyKind::SourcePrefix)),
        other => Err(LimitsConfigError::at(
            section.child("key"),
            KeyProblem::NotAKeyKind {
                value: other.to_owned(),
            },
        )),
    }
}

fn read_class(class: &Section<'_>) -> Result<ClassLimits> {
    class.only(CLASS_KEYS)?;
    read_class_keys(class)
}

/// `burst`, `rate` or `interval`, and `shadow`, of a class or a limit.
fn read_class_keys(class: &Section<'_>) -> Result<ClassLimits> {
    Ok(ClassLimits {
        config: read_bucket_config(class)?,
        shadow: class.flag("shadow")?,
    })
}

fn read_in_flight(in_flight: &Section<'_>) -> Result<InFlightLimits> {
    in_flight.only(IN_FLIGHT_KEYS)?;
    let quota = read_in_flight_quota(in_flight, "quota")?
        .ok_or_else(|| LimitsConfigError::at(in_flight.child("quota"), KeyProblem::Missing))?;
    let actors = match in_flight.uint("actors", u64::MAX)? {
        None => DEFAULT_ACTORS,
        Some(actors) => usize::try_from(actors).unwrap_or(usize::MAX),
    };
    let override_capacity = match in_flight.uint("override_capacity", u64::MAX)? {
        None => DEFAULT_OVERRIDE_CAPACITY,
        Some(capacity) => usize::try_from(capacity).unwrap_or(usize::MAX),
    };
    let mut overrides = BTreeMap::new();
    if let Some(table) = in_flight.table("overrides")? {
        for actor in table.table.keys() {
            if let Some(limit) = read_in_flight_quota(&table, actor)? {
                overrides.insert(actor.clone(), limit);
            }
        }
    }
    Ok(InFlightLimits {
        quota,
        actors,
        override_capacity,
        overrides,
        shadow: in_flight.flag("shadow")?,
        key: read_key_kind(in_flight)?.unwrap_or(KeyKind::Claim),
        total: in_flight
            .table("total")?
            .map(|total| read_total(&total))
            .transpose()?,
    })
}

/// `[admit.in_flight.total]`: the adaptive total's target (required), bounds, first L and
/// shares (permille), each checked as the builder checks it, the refusal on its key.
fn read_total(total: &Section<'_>) -> Result<AdaptiveTotal> {
    total.only(TOTAL_KEYS)?;
    let target = total
        .duration("target")?
        .ok_or_else(|| LimitsConfigError::at(total.child("target"), KeyProblem::Missing))?;
    let mut config = AdaptiveTotal::new(target);
    let limit = |key: &str| -> Result<Option<u32>> {
        Ok(total
            .uint(key, u64::from(MAX_TOTAL_LIMIT))?
            .map(|n| u32::try_from(n).unwrap_or(MAX_TOTAL_LIMIT)))
    };
    if let Some(floor) = limit("floor")? {
        config = config.floor(floor);
    }
    if let Some(ceiling) = limit("ceiling")? {
        config = config.ceiling(ceiling);
    }
    if let Some(initial) = limit("initial")? {
        config = config.initial(initial);
    }
    let refused = |key: &str, err| {
        LimitsConfigError::at(
            total.child(key),
            KeyProblem::InFlight(QuotasConfigError::AdaptiveTotal(err)),
        )
    };
    let defaults = Shares::default();
    let normal = limit("normal")?.unwrap_or(defaults.of(Priority::Normal));
    let sheddable = limit("sheddable")?.unwrap_or(defaults.of(Priority::Sheddable));
    let shares = Shares::permille(normal, sheddable).map_err(|err| refused("normal", err))?;
    config = config.shares(shares);
    config.validate().map_err(|err| {
        let key = match err {
            AdaptiveTotalError::Target { .. } => "target",
            AdaptiveTotalError::Bounds { .. } => "floor",
            AdaptiveTotalError::Shares { .. } => "normal",
        };
        refused(key, err)
    })?;
    Ok(config)
}

/// An in-flight quota: a whole number from 1, or `"unlimited"`.
fn read_in_flight_quota(section: &Section<'_>, key: &str) -> Result<Option<u32>> {
    let limit = match section.get(key) {
        Some(Value::String(text)) if text == "unlimited" => Some(UNLIMITED),
        Some(Value::String(_)) => {
            return Err(LimitsConfigError::at(
                section.child(key),
                KeyProblem::WrongType {
                    expected: "a whole number of ops, or \"unlimited\"",
                    found: "string other than \"unlimited\"",
                },
            ))
        }
        _ => section
            .uint(key, u64::from(u32::MAX))?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
    };
    match limit {
        Some(0) => Err(LimitsConfigError::at(
            section.child(key),
            KeyProblem::InFlight(crate::fairness::QuotasConfigError::ZeroQuota),
        )),
        other => Ok(other),
    }
}

fn read_volume(volume: &Section<'_>) -> Result<VolumeLimits> {
    volume.only(VOLUME_KEYS)?;
    let required = |key: &str| -> Result<u32> {
        volume
            .uint(key, u64::from(u32::MAX))?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            .ok_or_else(|| LimitsConfigError::at(volume.child(key), KeyProblem::Missing))
    };
    let events = required("events")?;
    let bytes = required("bytes")?;
    let window = volume
        .duration("window")?
        .ok_or_else(|| LimitsConfigError::at(volume.child("window"), KeyProblem::Missing))?;
    let rows = match volume.uint("rows", u64::MAX)? {
        None => Quota::DEFAULT_ROWS,
        Some(rows) => usize::try_from(rows).unwrap_or(usize::MAX),
    };
    let quota = Quota::new(events, bytes, window)
        .and_then(|quota| quota.with_rows(rows))
        .map_err(|err| volume_error(volume, err))?;
    Ok(VolumeLimits {
        quota,
        shadow: volume.flag("shadow")?,
        key: read_key_kind(volume)?.unwrap_or(KeyKind::Claim),
    })
}

/// The key of `[admit.volume]` a quota refusal is about.
pub(super) fn volume_key(err: RateLimitConfigError) -> &'static str {
    match err {
        RateLimitConfigError::ZeroEvents | RateLimitConfigError::EventsOutOfRange { .. } => {
            "events"
        }
        RateLimitConfigError::ZeroBytes | RateLimitConfigError::BytesOutOfRange { .. } => "bytes",
        RateLimitConfigError::WindowTooShort { .. }
        | RateLimitConfigError::WindowTooLong { .. }
        | RateLimitConfigError::WindowFixed { .. } => "window",
        RateLimitConfigError::ZeroRows
        | RateLimitConfigError::RowsNotPowerOfTwo { .. }
        | RateLimitConfigError::TooManyRows { .. }
        | RateLimitConfigError::RowsFixed { .. } => "rows",
    }
}

fn volume_error(volume: &Section<'_>, err: RateLimitConfigError) -> LimitsConfigError {
    LimitsConfigError::at(volume.child(volume_key(err)), KeyProblem::Volume(err))
}

fn read_bucket(bucket: &Section<'_>) -> Result<BucketLimits> {
    bucket.only(BUCKET_KEYS)?;
    Ok(BucketLimits {
        config: read_bucket_config(bucket)?,
        shadow: bucket.flag("shadow")?,
    })
}

/// `burst` and one of `rate` or `interval`.
fn read_bucket_config(section: &Section<'_>) -> Result<BucketConfig> {
    let burst = section
        .uint("burst", u64::from(u32::MAX))?
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        .ok_or_else(|| LimitsConfigError::at(section.child("burst"), KeyProblem::Missing))?;
    let (key, config) = match (section.get("rate"), section.get("interval")) {
        (Some(_), Some(_)) => {
            return Err(LimitsConfigError::at(
                section.path.clone(),
                KeyProblem::RateAndInterval,
            ))
        }
        (None, None) => {
            return Err(LimitsConfigError::at(
                section.path.clone(),
                KeyProblem::NoRate,
            ))
        }
        (Some(_), None) => {
            let text = section
                .string("rate", "a rate, as \"10/s\"")?
                .unwrap_or_default();
            let (tokens, period) = parse_rate(text).ok_or_else(|| {
                LimitsConfigError::at(
                    section.child("rate"),
                    KeyProblem::NotARate {
                        value: text.to_owned(),
                    },
                )
            })?;
            let config =
                BucketConfig::per(tokens, period).and_then(|config| config.with_burst(burst));
            ("rate", config)
        }
        (None, Some(_)) => {
            let interval = section.duration("interval")?.unwrap_or_default();
            ("interval", BucketConfig::new(burst, interval))
        }
    };
    config.map_err(|err| bucket_error(section, key, err))
}

/// A bucket refusal, on the key it is about: the burst, or the rate (or interval) key.
pub(super) fn bucket_error(
    section: &Section<'_>,
    rate_key: &str,
    err: BucketConfigError,
) -> LimitsConfigError {
    let key = match err {
        BucketConfigError::ZeroBurst | BucketConfigError::RefillSpanTooLong { .. } => "burst",
        _ => rate_key,
    };
    LimitsConfigError::at(section.child(key), KeyProblem::Bucket(err))
}

/// One table of the document and its full path.
pub(super) struct Section<'t> {
    pub(super) path: String,
    pub(super) table: &'t Table,
}

impl<'t> Section<'t> {
    pub(super) fn of(path: String, value: &'t Value) -> Result<Self> {
        match value {
            Value::Table(table) => Ok(Self { path, table }),
            other => Err(LimitsConfigError::at(
                path,
                KeyProblem::WrongType {
                    expected: "a table",
                    found: other.type_str(),
                },
            )),
        }
    }

    pub(super) fn child(&self, key: &str) -> String {
        let bare = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if bare {
            format!("{}.{key}", self.path)
        } else {
            format!("{}.{key:?}", self.path)
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&'t Value> {
        self.table.get(key)
    }

    /// Refuses the first key (in the table's order) that is not in `expected`.
    pub(super) fn only(&self, expected: &'static [&'static str]) -> Result<()> {
        match self
            .table
            .keys()
            .find(|key| !expected.contains(&key.as_str()))
        {
            Some(key) => Err(LimitsConfigError::at(
                self.child(key),
                KeyProblem::Unknown { expected },
            )),
            None => Ok(()),
        }
    }

    pub(super) fn table(&self, key: &str) -> Result<Option<Section<'t>>> {
        self.get(key)
            .map(|value| Section::of(self.child(key), value))
            .transpose()
    }

    pub(super) fn uint(&self, key: &str, max: u64) -> Result<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Integer(n)) => match u64::try_from(*n) {
                Ok(n) if n <= max => Ok(Some(n)),
                _ => Err(LimitsConfigError::at(
                    self.child(key),
                    KeyProblem::OutOfRange {
                        value: *n,
                        min: 0,
                        max,
                    },
                )),
            },
            Some(other) => Err(LimitsConfigError::at(
                self.child(key),
                KeyProblem::WrongType {
                    expected: "a whole number (no quotes, no fraction)",
                    found: other.type_str(),
                },
            )),
        }
    }

    pub(super) fn string(&self, key: &str, expected: &'static str) -> Result<Option<&'t str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(LimitsConfigError::at(
                self.child(key),
                KeyProblem::WrongType {
                    expected,
                    found: other.type_str(),
                },
            )),
        }
    }

    fn duration(&self, key: &str) -> Result<Option<std::time::Duration>> {
        let Some(text) = self.string(key, "a duration in quotes, as \"100ms\"")? else {
            return Ok(None);
        };
        parse_duration(text).map(Some).ok_or_else(|| {
            LimitsConfigError::at(
                self.child(key),
                KeyProblem::NotADuration {
                    value: text.to_owned(),
                },
            )
        })
    }

    /// A `true`/`false` switch, `false` when absent.
    pub(super) fn flag(&self, key: &str) -> Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Boolean(on)) => Ok(*on),
            Some(other) => Err(LimitsConfigError::at(
                self.child(key),
                KeyProblem::WrongType {
                    expected: "true or false",
                    found: other.type_str(),
                },
            )),
        }
    }
}
