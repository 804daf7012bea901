//! The refusal events, captured by a minimal subscriber set as the thread's default.

use crate::fairness::Quotas;
use crate::quota::{Quota, RateLimit};
use crate::{BucketConfig, Limiter, ManualClock};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// One event: its target, level and every field as its `Debug` rendering.
#[derive(Debug, Clone, PartialEq)]
struct Captured {
    target: String,
    level: Level,
    fields: BTreeMap<String, String>,
}

/// Keeps every event it is given.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

impl Capture {
    /// Runs `f` with this subscriber as the thread's default; returns the events it saw.
    fn during(f: impl FnOnce()) -> Vec<Captured> {
        let capture = Capture::default();
        tracing::subscriber::with_default(capture.clone(), f);
        let events = capture.0.lock().map(|e| e.clone());
        events.unwrap_or_default()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let captured = Captured {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
        };
        if let Ok(mut events) = self.0.lock() {
            events.push(captured);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The raw identity appears nowhere in the event: not its target, not any field.
fn assert_anonymous(event: &Captured, identity: &str) {
    let rendered = format!("{event:?}");
    assert!(!rendered.contains(identity), "{rendered}");
}

fn actor(event: &Captured) -> String {
    let actor = event.fields.get("actor").cloned().unwrap_or_default();
    assert_eq!(actor.len(), 16, "16 hex digits: {actor}");
    assert!(actor.chars().all(|c| c.is_ascii_hexdigit()), "{actor}");
    actor
}

const SECRET: &str = "alice@example.org";

#[test]
fn a_limiter_refusal_emits_one_event_naming_the_actor_by_digest_only() -> TestResult {
    let limiter = Limiter::builder().build_with_clock(
        [BucketConfig::new(1, Duration::from_secs(60))?],
        ManualClock::new(),
    )?;
    let events = Capture::during(|| {
        assert!(
            limiter.try_acquire(SECRET, 0).is_ok(),
            "an admission: no event"
        );
        assert!(limiter.try_acquire(SECRET, 0).is_err());
    });
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_anonymous(event, SECRET);
    assert_eq!(
        (event.target.as_str(), event.level),
        ("admit::limiter", Level::DEBUG)
    );
    let fields: Vec<(&str, &str)> = event
        .fields
        .iter()
        .filter(|(k, _)| k.as_str() != "actor")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("class", "0"),
            ("message", "refused"),
            ("shadow", "false"),
            ("via_overflow", "false"),
            ("wait_ns", "60000000000"),
        ]
    );
    // The same actor again has the same digest; another actor another.
    let again = Capture::during(|| {
        assert!(limiter.try_acquire(SECRET, 0).is_err());
        assert!(limiter.try_acquire("bob", 0).is_ok());
        assert!(limiter.try_acquire("bob", 0).is_err());
    });
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(actor(&again[0]), actor(event));
    assert_ne!(actor(&again[1]), actor(event));
    Ok(())
}

#[test]
fn digests_are_per_instance() -> TestResult {
    let class = BucketConfig::new(1, Duration::from_secs(60))?;
    let build = || Limiter::builder().build_with_clock([class], ManualClock::new());
    let (one, two) = (build()?, build()?);
    let events = Capture::during(|| {
        for limiter in [&one, &two] {
            assert!(limiter.try_acquire(SECRET, 0).is_ok());
            assert!(limiter.try_acquire(SECRET, 0).is_err());
        }
    });
    assert_eq!(events.len(), 2, "{events:?}");
    assert_ne!(actor(&events[0]), actor(&events[1]));
    Ok(())
}

#[test]
fn an_in_flight_refusal_emits_one_event() -> TestResult {
    let quotas = Quotas::builder().quota(1).build()?;
    let events = Capture::during(|| {
        let held = quotas.try_acquire(SECRET);
        assert!(held.is_ok());
        assert!(quotas.try_acquire(SECRET).is_err());
    });
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_anonymous(event, SECRET);
    assert_eq!(event.target, "admit::fairness");
    actor(event);
    assert_eq!(event.fields.get("limit").map(String::as_str), Some("1"));
    assert_eq!(event.fields.get("in_flight").map(String::as_str), Some("1"));
    assert_eq!(
        event.fields.get("via_overflow").map(String::as_str),
        Some("false")
    );
    Ok(())
}

#[test]
fn a_volume_refusal_emits_one_event() -> TestResult {
    let clock = ManualClock::new();
    let limit = RateLimit::with_clock(Quota::new(1, 1_024, Duration::from_secs(60))?, clock);
    let events = Capture::during(|| {
        assert!(limit.try_acquire(SECRET, 10).is_ok());
        assert!(limit.try_acquire(SECRET, 10).is_err());
    });
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_anonymous(event, SECRET);
    assert_eq!(event.target, "admit::quota");
    actor(event);
    assert_eq!(
        event.fields.get("limit").map(String::as_str),
        Some("events")
    );
    assert_eq!(
        event.fields.get("wait_ns").map(String::as_str),
        Some("60000000000")
    );
    assert_eq!(
        event.fields.get("permanent").map(String::as_str),
        Some("false")
    );
    Ok(())
}

#[test]
fn a_refusal_shadow_mode_admits_is_the_same_event_marked_shadow() -> TestResult {
    let limiter = Limiter::builder().build_with_clock(
        [BucketConfig::new(1, Duration::from_secs(60))?],
        ManualClock::new(),
    )?;
    let quotas = Quotas::builder().quota(1).build()?;
    let limit = RateLimit::with_clock(
        Quota::new(1, 1_024, Duration::from_secs(60))?,
        ManualClock::new(),
    );
    limiter.set_shadow(0, true)?;
    quotas.set_shadow(true);
    limit.set_shadow(true);
    let events = Capture::during(|| {
        assert!(limiter.try_acquire(SECRET, 0).is_ok());
        assert!(limiter.try_acquire(SECRET, 0).is_ok(), "shadow: admitted");
        let held = quotas.try_acquire(SECRET);
        assert!(quotas.try_acquire(SECRET).is_ok(), "shadow: admitted");
        drop(held);
        assert!(limit.try_acquire(SECRET, 1).is_ok());
        assert!(limit.try_acquire(SECRET, 1).is_ok(), "shadow: admitted");
    });
    let seen: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| {
            let field = |name: &str| e.fields.get(name).map_or("", String::as_str);
            (e.target.as_str(), field("message"), field("shadow"))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("admit::limiter", "refused", "true"),
            ("admit::fairness", "refused", "true"),
            ("admit::quota", "refused", "true"),
        ]
    );
    for event in &events {
        assert_anonymous(event, SECRET);
    }
    Ok(())
}
