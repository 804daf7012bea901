//! The surface every user sees (issue #12, part): any `Hash` key, and refusals that are owned
//! values (`'static`, `Clone`, `Error + Display`, `Send + Sync`), so `?` carries them anywhere.

use crate::fairness::Quotas;
use crate::{BucketConfig, Limiter};
use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

type BoxError = Box<dyn Error + Send + Sync>;

/// Every refusal and every configuration error the crate returns.
fn assert_refusal<E: Error + Clone + Send + Sync + 'static>() {}

#[test]
fn every_refusal_is_owned_cloneable_and_thread_safe() {
    // Limiter.
    assert_refusal::<crate::limiter::Denied>();
    assert_refusal::<crate::limiter::Limited>();
    assert_refusal::<crate::limiter::InvalidCharge>();
    assert_refusal::<crate::limiter::LimiterError>();
    // Bucket.
    assert_refusal::<crate::bucket::TakeError>();
    assert_refusal::<crate::bucket::Empty>();
    assert_refusal::<crate::bucket::ExceedsBurst>();
    assert_refusal::<crate::bucket::BucketConfigError>();
    // Volume quotas.
    assert_refusal::<crate::quota::QuotaRefused>();
    assert_refusal::<crate::quota::QuotaExceeded>();
    assert_refusal::<crate::quota::QuotaConfigError>();
    // In-flight quotas.
    assert_refusal::<crate::fairness::QuotaExceeded>();
    assert_refusal::<crate::fairness::QuotasError>();
    // Registrar profile.
    assert_refusal::<crate::registrar::RegistrarError>();
    assert_refusal::<crate::registrar::Throttled>();
    assert_refusal::<crate::registrar::ProfileError>();
    assert_refusal::<crate::registrar::VerbSetError>();
    assert_refusal::<crate::registrar::ConfigError>();
    // Clock.
    assert_refusal::<crate::clock::ReadingAhead>();
}

#[test]
fn the_limiter_takes_any_hash_key() {
    let config = BucketConfig::new(1, 1_000).unwrap();
    let limiter = Limiter::builder().build([config]).unwrap();
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    assert!(limiter.charge_at("alice", 0, 0).is_ok());
    assert!(limiter.charge_at(&ip, 0, 0).is_ok());
    assert!(limiter.charge_at(&42u64, 0, 0).is_ok());
    assert!(limiter.charge_at(&(ip, 443u16), 0, 0).is_ok());
    // Each key had one token and spent it: the second charge of each is refused.
    assert!(limiter.charge_at(&String::from("alice"), 0, 0).is_err());
    assert!(limiter.charge_at(&ip, 0, 0).is_err());
    assert!(limiter.charge_at(&42u64, 0, 0).is_err());
    assert!(limiter.charge_at(&(ip, 443u16), 0, 0).is_err());
    // Another address, and the same address as IPv6, are other identities.
    let other = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 8));
    assert!(limiter.charge_at(&other, 0, 0).is_ok());
    assert!(limiter
        .charge_at(
            &IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped()),
            0,
            0
        )
        .is_ok());
    assert!(limiter
        .charge_at(&IpAddr::V6(Ipv6Addr::LOCALHOST), 0, 0)
        .is_ok());
    // A key hashed once charges the same entry.
    let key = limiter.key("alice", 0).unwrap();
    assert!(limiter.charge_key_at(&key, 1, 0).is_err());
    assert_eq!(limiter.len(), 7);
}

#[test]
fn a_str_and_its_bytes_are_different_identities() {
    // Decided: `Hash` is typed, and the crate keys by `Hash`. A `str` and a `[u8]` of the same
    // bytes are two identities with two buckets; arrays, `Vec<u8>` and `&[u8]` are one.
    let config = BucketConfig::new(1, 1_000).unwrap();
    let limiter = Limiter::builder().build([config]).unwrap();
    assert!(limiter.charge_at("alice", 0, 0).is_ok());
    assert!(limiter.charge_at(b"alice", 0, 0).is_ok());
    assert!(limiter.charge_at(&b"alice"[..], 0, 0).is_err());
    assert!(limiter.charge_at(&b"alice".to_vec(), 0, 0).is_err());
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
fn submit(quotas: &Quotas, actor: &String) -> Result<crate::fairness::OwnedPermit, BoxError> {
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
        .downcast_ref::<crate::fairness::QuotaExceeded>()
        .unwrap();
    assert_eq!((refusal.limit(), refusal.in_flight()), (1, 1));
    assert!(refused.to_string().contains("quota is 1"), "{refused}");
    drop(held);
    assert!(submit(&quotas, &String::from("agent-7")).is_ok());

    // The other refusals go the same way.
    fn charge(limiter: &Limiter, actor: &str) -> Result<(), BoxError> {
        limiter.charge_at(actor, 0, 0)?;
        Ok(())
    }
    let limiter = Limiter::builder()
        .build([BucketConfig::new(1, 1_000).unwrap()])
        .unwrap();
    assert!(charge(&limiter, "bob").is_ok());
    assert!(charge(&limiter, "bob").is_err());
}
