//! The surface every user sees: any `Hash` key, and refusals that are owned
//! values (`'static`, `Clone`, `Error + Display`, `Send + Sync`), so `?` carries them anywhere.

use admit::fairness::Quotas;
use admit::{BucketConfig, Limiter};
use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

type BoxError = Box<dyn Error + Send + Sync>;

/// Every refusal and every configuration error the crate returns.
fn assert_refusal<E: Error + Clone + Send + Sync + 'static>() {}

#[test]
fn every_refusal_is_owned_cloneable_and_thread_safe() {
    // Limiter.
    assert_refusal::<admit::limiter::LimiterRefused>();
    assert_refusal::<admit::limiter::Limited>();
    assert_refusal::<admit::limiter::InvalidCharge>();
    assert_refusal::<admit::limiter::LimiterConfigError>();
    // Bucket.
    assert_refusal::<admit::bucket::BucketRefused>();
    assert_refusal::<admit::bucket::Empty>();
    assert_refusal::<admit::bucket::ExceedsBurst>();
    assert_refusal::<admit::bucket::BucketConfigError>();
    // Volume quotas.
    assert_refusal::<admit::quota::RateLimitRefused>();
    assert_refusal::<admit::quota::VolumeExceeded>();
    assert_refusal::<admit::quota::RateLimitConfigError>();
    // In-flight quotas.
    assert_refusal::<admit::fairness::QuotasRefused>();
    assert_refusal::<admit::fairness::QuotasConfigError>();
    // Registrar profile.
    assert_refusal::<admit::registrar::RegistrarError>();
    assert_refusal::<admit::registrar::Throttled>();
    assert_refusal::<admit::registrar::RegistrarBuildError>();
    assert_refusal::<admit::registrar::VerbSetError>();
    assert_refusal::<admit::registrar::RegistrarConfigError>();
    // Clock.
    assert_refusal::<admit::clock::ReadingAhead>();
    // The limits file.
    #[cfg(feature = "config")]
    assert_refusal::<admit::live::LimitsConfigError>();
    // The tower layer's per-route rules.
    #[cfg(feature = "tower")]
    assert_refusal::<admit::tower::RuleRefused>();
    // The tower layer of rate limits alone.
    #[cfg(feature = "tower")]
    assert_refusal::<admit::tower::RateConfigError>();
}

#[test]
fn the_limiter_takes_any_hash_key() {
    let config = BucketConfig::new(1, Duration::from_millis(1_000)).unwrap();
    let limiter = Limiter::builder().build([config]).unwrap();
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    assert!(limiter.try_acquire_at("alice", 0, 0).is_ok());
    assert!(limiter.try_acquire_at(&ip, 0, 0).is_ok());
    assert!(limiter.try_acquire_at(&42u64, 0, 0).is_ok());
    assert!(limiter.try_acquire_at(&(ip, 443u16), 0, 0).is_ok());
    // Each key had one token and spent it: the second charge of each is refused.
    assert!(limiter
        .try_acquire_at(&String::from("alice"), 0, 0)
        .is_err());
    assert!(limiter.try_acquire_at(&ip, 0, 0).is_err());
    assert!(limiter.try_acquire_at(&42u64, 0, 0).is_err());
    assert!(limiter.try_acquire_at(&(ip, 443u16), 0, 0).is_err());
    // Another address, and the same address as IPv6, are other identities.
    let other = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 8));
    assert!(limiter.try_acquire_at(&other, 0, 0).is_ok());
    assert!(limiter
        .try_acquire_at(
            &IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped()),
            0,
            0
        )
        .is_ok());
    assert!(limiter
        .try_acquire_at(&IpAddr::V6(Ipv6Addr::LOCALHOST), 0, 0)
        .is_ok());
    // A key hashed once charges the same entry.
    let key = admit::HashedActor::new("alice");
    assert!(limiter.try_acquire_hashed_at(&key, 0, 1, 0).is_err());
    assert_eq!(limiter.len(), 7);
}

#[test]
fn a_str_and_its_bytes_are_different_identities() {
    // Decided: `Hash` is typed, and the crate keys by `Hash`. A `str` and a `[u8]` of the same
    // bytes are two identities with two buckets; arrays, `Vec<u8>` and `&[u8]` are one.
    let config = BucketConfig::new(1, Duration::from_millis(1_000)).unwrap();
    let limiter = Limiter::builder().build([config]).unwrap();
    assert!(limiter.try_acquire_at("alice", 0, 0).is_ok());
    assert!(limiter.try_acquire_at(b"alice", 0, 0).is_ok());
    assert!(limiter.try_acquire_at(&b"alice"[..], 0, 0).is_err());
    assert!(limiter.try_acquire_at(&b"alice".to_vec(), 0, 0).is_err());
    assert_eq!(limiter.len(), 2);

    let quotas = Quotas::builder()
        .quota(1)
        .override_quota("alice", 2)
        .build()
        .unwrap();
    assert_eq!(quotas.limit_of("alice"), 2);
    assert_eq!(quotas.limit_of(&String::from("alice")), 2);
    assert_eq!(quotas.limit_of(b"alice"), 1);
    let _p = quotas.try_acquire("alice").unwrap();
    assert_eq!(quotas.in_flight("alice"), 1);
    assert_eq!(quotas.in_flight(b"alice"), 0);
}

/// Takes a place for `actor`, handing any refusal up with `?`.
fn submit(quotas: &Quotas, actor: &String) -> Result<admit::fairness::OwnedPermit, BoxError> {
    let permit = quotas.try_acquire_owned(actor)?;
    Ok(permit)
}

#[test]
fn a_refusal_goes_up_through_question_mark() {
    let quotas = Quotas::builder().quota(1).build().unwrap();
    let actor = String::from("agent-7");
    let held = submit(&quotas, &actor).unwrap();
    let refused = submit(&quotas, &actor).unwrap_err();
    // The refusal outlives the actor's name: it borrows nothing.
    drop(actor);
    let refusal = refused
        .downcast_ref::<admit::fairness::QuotasRefused>()
        .unwrap();
    assert_eq!((refusal.limit(), refusal.in_flight()), (1, 1));
    assert!(refused.to_string().contains("quota is 1"), "{refused}");
    drop(held);
    assert!(submit(&quotas, &String::from("agent-7")).is_ok());

    // The other refusals go the same way.
    fn charge(limiter: &Limiter, actor: &str) -> Result<(), BoxError> {
        limiter.try_acquire_at(actor, 0, 0)?;
        Ok(())
    }
    let limiter = Limiter::builder()
        .build([BucketConfig::new(1, Duration::from_millis(1_000)).unwrap()])
        .unwrap();
    assert!(charge(&limiter, "bob").is_ok());
    assert!(charge(&limiter, "bob").is_err());
}

#[test]
fn every_config_builds_from_a_duration_or_a_rate() {
    use admit::quota::{Quota, RateLimit};
    // Token buckets, for the bucket and for each limiter class: a rate, or a burst and a
    // `Duration`.
    let per_second = BucketConfig::per_second(100).unwrap();
    let per_minute = BucketConfig::per_minute(30).unwrap().with_burst(5).unwrap();
    let per_hour = BucketConfig::per_hour(1_200).unwrap();
    let per = BucketConfig::per(3, Duration::from_secs(6)).unwrap();
    let interval = BucketConfig::new(4, Duration::from_millis(250)).unwrap();
    let fast = BucketConfig::per_second(1_000_000).unwrap();
    assert_eq!(fast.refill_interval(), Duration::from_micros(1));
    assert_eq!(per_second.refill_interval(), Duration::from_millis(10));
    assert_eq!(per_minute.refill_interval(), Duration::from_secs(2));
    assert_eq!(per_hour.refill_interval(), Duration::from_secs(3));
    assert_eq!(per.refill_interval(), Duration::from_secs(2));
    assert_eq!(interval.refill_span(), Duration::from_secs(1));
    let bucket = admit::TokenBucket::new(per_second);
    assert!(bucket.try_acquire_n_at(100, 0).is_ok());
    assert!(bucket.try_acquire_at(0).is_err());
    assert!(
        bucket.try_acquire_at(10_000_000).is_ok(),
        "one token per 10 ms"
    );
    let limiter = Limiter::builder()
        .build([per_second, per_minute, per_hour, per, interval, fast])
        .unwrap();
    assert_eq!(limiter.classes(), 6);
    assert_eq!(limiter.config(2), Some(per_hour), "kept as given");
    assert!(limiter.try_acquire_n("k", 5, 1_000_000).is_ok());
    assert!(
        limiter.try_acquire_n("k", 5, 1_000).is_err(),
        "a million per second, not more"
    );
    // The volume quota's window is a `Duration`.
    let volume = RateLimit::new(Quota::new(10, 4_096, Duration::from_secs(60)).unwrap());
    assert!(volume.try_acquire("session", 100).is_ok());
    // The in-flight quotas have no time in them: a count only.
    assert!(Quotas::builder().quota(4).build().is_ok());
}

/// Every `pub struct`, `pub enum`, `pub trait` and `pub type` declared in `src/`: no two may
/// share a name, wherever they live: one name, one meaning.
#[test]
fn no_two_public_types_share_a_name() {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // `check` is the test-only reference models; `bin` is admit-sim's own.
                if !path.ends_with("check") && !path.ends_with("bin") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines() {
                    let line = line.trim_start();
                    for kind in ["pub struct ", "pub enum ", "pub trait ", "pub type "] {
                        if let Some(rest) = line.strip_prefix(kind) {
                            let name: String = rest
                                .chars()
                                .take_while(|c| c.is_alphanumeric() || *c == '_')
                                .collect();
                            out.push((name, path.display().to_string()));
                        }
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    assert!(found.len() > 40, "the walk found the public types");
    found.sort();
    let clashes: Vec<_> = found
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| format!("{} in {} and {}", w[0].0, w[0].1, w[1].1))
        .collect();
    assert!(
        clashes.is_empty(),
        "public types sharing a name: {clashes:?}"
    );
}
