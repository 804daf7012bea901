//! Quotas changed at runtime (`reconfig.rs`, `overrides.rs`), one test per rule.

use super::{Quotas, QuotasConfigError, UNLIMITED};

#[test]
fn a_lowered_quota_refuses_until_the_count_drops_below_it() {
    let quotas = Quotas::builder().quota(4).build().unwrap();
    let mut held: Vec<_> = (0..4).map(|_| quotas.try_acquire("a").unwrap()).collect();
    quotas.set_quota(2).unwrap();
    assert_eq!(quotas.in_flight("a"), 4, "permits above the new quota stay");
    let refused = quotas.try_acquire("a").unwrap_err();
    assert_eq!((refused.limit(), refused.in_flight()), (2, 4));
    held.pop();
    held.pop();
    assert!(quotas.try_acquire("a").is_err(), "at 2 of 2: still refused");
    held.pop();
    let permit = quotas.try_acquire("a").unwrap();
    assert!(quotas.try_acquire("a").is_err(), "back at the new quota");
    drop((held, permit));
    assert_eq!(quotas.total_in_flight(), 0);
}

#[test]
fn a_raised_quota_admits_at_once() {
    let quotas = Quotas::builder().quota(1).build().unwrap();
    let first = quotas.try_acquire("a").unwrap();
    assert!(quotas.try_acquire("a").is_err());
    quotas.set_quota(2).unwrap();
    assert_eq!(quotas.quota(), 2);
    let second = quotas.try_acquire("a").unwrap();
    assert!(quotas.try_acquire("a").is_err());
    drop((first, second));
}

#[test]
fn a_lowered_default_caps_the_shared_overflow_count() {
    let quotas = Quotas::builder().quota(3).actors(1).build().unwrap();
    let owner = quotas.try_acquire("owner").unwrap(); // takes the one entry
    let shared: Vec<_> = ["b", "c", "d"]
        .iter()
        .map(|a| quotas.try_acquire(a).unwrap())
        .collect();
    assert!(shared.iter().all(|p| p.via_overflow()));
    quotas.set_quota(1).unwrap();
    assert_eq!(quotas.overflow_in_flight(), 3, "shared places held stay");
    let refused = quotas.try_acquire("e").unwrap_err();
    assert!(refused.via_overflow());
    assert_eq!(refused.limit(), 1);
    drop(shared);
    assert!(quotas.try_acquire("e").unwrap().via_overflow());
    drop(owner);
}

#[test]
fn overrides_set_and_removed_at_runtime() {
    let quotas = Quotas::builder().quota(1).build().unwrap();
    quotas.set_override("importer", Some(3)).unwrap();
    let held: Vec<_> = (0..3)
        .map(|_| quotas.try_acquire("importer").unwrap())
        .collect();
    assert!(quotas.try_acquire("importer").is_err());
    assert_eq!(quotas.limit_of("other"), 1, "only the named actor");
    quotas.set_override("importer", None).unwrap();
    assert_eq!(quotas.limit_of("importer"), 1);
    assert_eq!(quotas.in_flight("importer"), 3, "permits held stay");
    quotas.set_override("importer", Some(UNLIMITED)).unwrap();
    assert!(
        quotas.try_acquire("importer").is_ok(),
        "unlimited: admitted"
    );
    quotas.set_override("never-overridden", None).unwrap();
    drop(held);
    assert_eq!(
        quotas.set_override("x", Some(0)),
        Err(QuotasConfigError::ZeroQuota)
    );
    assert_eq!(quotas.set_quota(0), Err(QuotasConfigError::ZeroQuota));
    assert_eq!(quotas.check_quota(0), Err(QuotasConfigError::ZeroQuota));
    assert_eq!(quotas.quota(), 1, "a refused quota changes nothing");
}

#[test]
fn two_claimers_of_one_actor_share_one_slot() {
    let quotas = Quotas::builder().override_capacity(1).build().unwrap();
    quotas.set_override("a", Some(5)).unwrap();
    quotas.set_override("a", Some(6)).unwrap();
    quotas.set_override("a", None).unwrap();
    quotas.set_override("a", Some(7)).unwrap();
    assert_eq!(quotas.limit_of("a"), 7, "one actor, one slot, found again");
    let threads = 4;
    let quotas = Quotas::builder().override_capacity(1).build().unwrap();
    std::thread::scope(|s| {
        for t in 0..threads {
            let quotas = &quotas;
            s.spawn(move || quotas.set_override("same", Some(10 + t)).unwrap());
        }
    });
    assert!((10..10 + threads).contains(&quotas.limit_of("same")));
}

#[test]
fn an_override_beyond_capacity_is_refused_and_changes_nothing() {
    let quotas = Quotas::builder()
        .quota(2)
        .override_quota("built", 9)
        .override_capacity(2)
        .build()
        .unwrap();
    assert_eq!(quotas.override_capacity(), 2);
    quotas.set_override("one", Some(4)).unwrap();
    let full = Err(QuotasConfigError::TooManyOverrides { capacity: 2 });
    assert_eq!(quotas.check_override("two", Some(4)), full);
    assert_eq!(quotas.set_override("two", Some(4)), full);
    assert_eq!(quotas.limit_of("two"), 2, "unchanged");
    let message = QuotasConfigError::TooManyOverrides { capacity: 2 }.to_string();
    assert!(message.contains("override_capacity"), "{message}");
    // A removed override keeps its actor's slot: the capacity counts actors ever overridden.
    quotas.set_override("one", None).unwrap();
    assert_eq!(quotas.set_override("two", Some(4)), full);
    assert!(quotas.set_override("one", Some(5)).is_ok());
    assert!(
        quotas.check_override("two", None).is_ok(),
        "removing is always possible"
    );
}
