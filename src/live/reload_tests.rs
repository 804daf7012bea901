//! Reloading: all of a file or none of it, read back through every primitive's getters.

use super::*;
use crate::clock::ManualClock;
use std::time::Duration;

const GOOD: &str = r#"
[admit.limiter]
cap = 512

[[admit.limiter.class]]
burst = 20
rate = "10/s"

[[admit.limiter.class]]
burst = 5
interval = "12s"
shadow = true

[admit.in_flight]
quota = 4
actors = 256
overrides = { importer = 16 }

[admit.volume]
events = 100
bytes = 65536
window = "60s"

[admit.bucket]
burst = 100
rate = "50/s"
"#;

/// A handle built from `document`, over a manual clock it returns.
pub(super) fn live(document: &str) -> (LiveLimits<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let config = LimitsConfig::from_toml_str(document).unwrap();
    (
        LiveLimits::from_config_with_clock(&config, clock.clone()).unwrap(),
        clock,
    )
}

/// Every limit the handle runs, as its primitives report it.
fn snapshot(live: &LiveLimits<ManualClock>) -> String {
    let limiter = live.limiter().unwrap();
    let quotas = live.in_flight().unwrap();
    let volume = live.volume().unwrap();
    let bucket = live.bucket().unwrap();
    format!(
        "limiter cap {} classes {:?} shadow {:?}; in_flight quota {} importer {} other {} \
         actors {} shadow {}; volume {:?} shadow {}; bucket {:?} shadow {}",
        limiter.cap(),
        (0..limiter.classes())
            .map(|c| limiter.config(c))
            .collect::<Vec<_>>(),
        (0..limiter.classes())
            .map(|c| limiter.is_shadow(c))
            .collect::<Vec<_>>(),
        quotas.quota(),
        quotas.limit_of("importer"),
        quotas.limit_of("exporter"),
        quotas.actors(),
        quotas.is_shadow(),
        volume.quota(),
        volume.is_shadow(),
        bucket.config(),
        bucket.is_shadow(),
    )
}

#[test]
fn the_file_builds_what_it_says() {
    let (live, _) = live(GOOD);
    let limiter = live.limiter().unwrap();
    assert_eq!(limiter.cap(), 512);
    assert_eq!(
        limiter.config(1),
        Some(BucketConfig::new(5, Duration::from_secs(12)).unwrap())
    );
    assert_eq!(limiter.is_shadow(1), Some(true));
    let quotas = live.in_flight().unwrap();
    assert_eq!((quotas.quota(), quotas.limit_of("importer")), (4, 16));
    assert_eq!(live.volume().unwrap().quota().events(), 100);
    assert_eq!(live.bucket().unwrap().config().burst(), 100);
}

#[test]
fn one_bad_key_among_good_ones_changes_nothing() {
    let (live, _) = live(GOOD);
    let before = snapshot(&live);
    // Every value changed, then one key wrong: each bad file must leave `before` running.
    let changed = GOOD
        .replace("burst = 20", "burst = 40")
        .replace("quota = 4", "quota = 8")
        .replace("importer = 16", "importer = 32, exporter = 2")
        .replace("events = 100", "events = 200")
        .replace("burst = 100", "burst = 10");
    let bad = [
        (
            changed.replace("interval = \"12s\"", "rate = \"10/m\""),
            "admit.limiter.class[1].rate",
        ),
        (format!("{changed}\n[admit.extra]\n"), "admit.extra"),
        (
            changed.replace("cap = 512", "cap = 1024"),
            "admit.limiter.cap",
        ),
        (
            changed.replace("actors = 256", "actors = 128"),
            "admit.in_flight.actors",
        ),
        // A limiter counting milliseconds cannot take a microsecond class.
        (
            changed.replace("\"12s\"", "\"1500us\""),
            "admit.limiter.class[1]",
        ),
        (
            changed.replace("shadow = true", "shadow = 1"),
            "admit.limiter.class[1].shadow",
        ),
        // A class's burst above what its config word holds beside its era bit.
        (
            changed.replace("burst = 40", "burst = 3000000000"),
            "admit.limiter.class[0]",
        ),
        (
            changed.replace("window = \"60s\"", "window = \"30s\""),
            "admit.volume.window",
        ),
        (
            changed.replace("window = \"60s\"", "window = \"60s\"\nrows = 2"),
            "admit.volume.rows",
        ),
        (
            changed.replace("[admit.bucket]\nburst = 10\nrate = \"50/s\"\n", ""),
            "admit.bucket",
        ),
        (
            format!("{changed}\n[[admit.limiter.class]]\nburst = 1\nrate = \"1/s\"\n"),
            "admit.limiter.class",
        ),
    ];
    for (document, key) in bad {
        let err = live.reload_str(&document).unwrap_err();
        assert_eq!(err.key(), Some(key), "{err}");
        assert!(err.to_string().starts_with(&format!("{key}: ")), "{err}");
        assert_eq!(
            snapshot(&live),
            before,
            "refused by {key}, yet something changed"
        );
    }
    // And the same changes with no bad key all apply.
    let reloaded = live.reload_str(&changed).unwrap();
    assert_eq!(
        reloaded.changed(),
        [
            // An added override first: the one change a racing setter can still refuse.
            "admit.in_flight.overrides.exporter",
            "admit.in_flight.overrides.importer",
            "admit.limiter.class[0]",
            "admit.in_flight.quota",
            "admit.volume",
            "admit.bucket",
        ]
    );
    assert_ne!(snapshot(&live), before);
}

#[test]
fn a_good_reload_changes_exactly_what_it_says() {
    let (live, _) = live(GOOD);
    let before = snapshot(&live);
    let reloaded = live
        .reload_str(
            &GOOD
                .replace("burst = 5\n", "burst = 6\n")
                .replace("quota = 4", "quota = 3"),
        )
        .unwrap();
    assert_eq!(
        reloaded.changed(),
        ["admit.limiter.class[1]", "admit.in_flight.quota"]
    );
    let want = before
        .replace("burst: 5", "burst: 6")
        .replace("in_flight quota 4", "in_flight quota 3")
        .replace("other 4", "other 3");
    assert_eq!(snapshot(&live), want);
    assert_eq!(
        live.reload_str(GOOD).unwrap().changed().len(),
        2,
        "and back"
    );
    assert_eq!(snapshot(&live), before);
    assert!(live.reload_str(GOOD).unwrap().changed().is_empty());
}

#[test]
fn shadow_switches_follow_the_file_and_an_absent_one_is_off() {
    let (live, _) = live(GOOD);
    let document = GOOD
        .replace("shadow = true\n", "")
        .replace("[admit.bucket]\n", "[admit.bucket]\nshadow = true\n");
    let reloaded = live.reload_str(&document).unwrap();
    assert_eq!(
        reloaded.changed(),
        ["admit.limiter.class[1].shadow", "admit.bucket.shadow"]
    );
    assert_eq!(live.limiter().unwrap().is_shadow(1), Some(false));
    assert!(live.bucket().unwrap().is_shadow());
}

#[test]
fn an_override_the_file_drops_is_removed() {
    let (live, _) = live(GOOD);
    let quotas = live.in_flight().unwrap().clone();
    assert_eq!(quotas.limit_of("importer"), 16);
    let reloaded = live
        .reload_str(&GOOD.replace("overrides = { importer = 16 }\n", ""))
        .unwrap();
    assert_eq!(reloaded.changed(), ["admit.in_flight.overrides.importer"]);
    assert_eq!(quotas.limit_of("importer"), 4, "the default again");
}

#[test]
fn an_unknown_key_and_a_missing_file_are_named() {
    let (live, _) = live(GOOD);
    let before = snapshot(&live);
    let err = live
        .reload_str(&GOOD.replace("events = 100", "events = 100\nevnets = 5"))
        .unwrap_err();
    assert_eq!(err.key(), Some("admit.volume.evnets"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.toml");
    let err = live.reload(&path).unwrap_err();
    assert!(matches!(&err, LimitsConfigError::Read { path: p, .. } if *p == path));
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(snapshot(&live), before);
    std::fs::write(&path, GOOD.replace("quota = 4", "quota = 5")).unwrap();
    assert_eq!(
        live.reload(&path).unwrap().changed(),
        ["admit.in_flight.quota"]
    );
}

#[test]
fn a_reload_neither_adds_nor_removes_a_primitive() {
    let (live, _) = live("[admit.bucket]\nburst = 1\nrate = \"1/s\"\n");
    let err = live
        .reload_str("[admit.bucket]\nburst = 1\nrate = \"1/s\"\n[admit.in_flight]\nquota = 1\n")
        .unwrap_err();
    assert_eq!(err.key(), Some("admit.in_flight"));
    assert!(matches!(
        err,
        LimitsConfigError::Key {
            problem: KeyProblem::NotRunning,
            ..
        }
    ));
    let err = live.reload_str("").unwrap_err();
    assert_eq!(err.key(), Some("admit.bucket"));
}

/// The example in `docs/en/operations.md`: 10/s, burst lowered from 20 to 5 by a reload; an
/// actor who just spent all 20 gets its next token after 1.6 s, not 0.1 s.
#[test]
fn an_actor_that_owes_tokens_keeps_its_debt_through_a_reload() {
    let (live, clock) = live(GOOD);
    let limiter = live.limiter().unwrap().clone();
    for _ in 0..20 {
        assert!(limiter.try_acquire("alice", 0).is_ok());
    }
    live.reload_str(&GOOD.replace("burst = 20", "burst = 5"))
        .unwrap();
    clock.advance(Duration::from_millis(1_599));
    assert!(limiter.try_acquire("alice", 0).is_err());
    clock.advance(Duration::from_millis(1));
    assert!(limiter.try_acquire("alice", 0).is_ok());
    assert!(
        limiter.try_acquire("bob", 0).is_ok(),
        "an idle actor is full, at 5"
    );
}

/// Permits held above a lowered in-flight quota stay; acquires are refused until the count
/// drops below it.
#[test]
fn permits_above_a_lowered_quota_stay() {
    let (live, _) = live(GOOD);
    let quotas = live.in_flight().unwrap().clone();
    let held: Vec<_> = (0..4)
        .map(|_| quotas.try_acquire("agent").unwrap())
        .collect();
    live.reload_str(&GOOD.replace("quota = 4", "quota = 2"))
        .unwrap();
    assert_eq!(quotas.in_flight("agent"), 4);
    let mut held = held.into_iter();
    drop(held.next());
    drop(held.next());
    assert!(quotas.try_acquire("agent").is_err(), "2 held, quota 2");
    drop(held.next());
    assert!(quotas.try_acquire("agent").is_ok());
}

/// A setter refusing what its check accepted undoes the changes made before it: here the
/// override slots run out on the second new actor (each check alone passes).
#[test]
fn a_setter_refusal_mid_reload_undoes_what_was_applied() {
    let document = GOOD.replace("actors = 256", "actors = 256\noverride_capacity = 2");
    let (live, _) = live(&document);
    let before = snapshot(&live);
    let err = live
        .reload_str(
            &document
                .replace("burst = 20", "burst = 30")
                .replace("importer = 16", "importer = 16, a = 1, b = 2"),
        )
        .unwrap_err();
    assert!(
        err.key()
            .is_some_and(|k| k.starts_with("admit.in_flight.overrides.")),
        "{err}"
    );
    assert_eq!(snapshot(&live), before);
}

#[test]
fn the_documented_example_file_builds_and_reloads_onto_itself() {
    let text = include_str!("../../docs/admit.example.toml");
    let live = LiveLimits::from_toml_str(text).unwrap();
    assert!(live.reload_str(text).unwrap().changed().is_empty());
}

/// The messages `docs/en/operations.md` (and its Korean twin) show are the ones a reload
/// prints.
#[test]
fn the_operations_pages_show_the_real_messages() {
    let running = GOOD.replace("cap = 512", "cap = 4096");
    let (live, _) = live(&running);
    let bad = [
        running.replace("interval = \"12s\"", "rate = \"10/m\""),
        running.replace("quota = 4", "quotas = 4"),
        running.replace("cap = 4096", "cap = 8192"),
    ];
    for page in [
        include_str!("../../docs/en/operations.md"),
        include_str!("../../docs/ko/operations.md"),
    ] {
        for document in &bad {
            let message = live.reload_str(document).unwrap_err().to_string();
            assert!(page.contains(&message), "the page lacks: {message}");
        }
    }
}

/// What an actor was charged in the current window stays charged across a reload of the
/// volume quota: lowered below it, the actor is refused; raised, it has the difference.
#[test]
fn the_window_charges_stay_through_a_volume_reload() {
    let (live, _) = live(GOOD);
    let volume = live.volume().unwrap().clone();
    for _ in 0..80 {
        assert!(volume.try_acquire("tenant", 1).is_ok());
    }
    live.reload_str(&GOOD.replace("events = 100", "events = 50"))
        .unwrap();
    assert!(volume.try_acquire("tenant", 1).is_err(), "80 of 50");
    assert_eq!(volume.usage("tenant").events, 80);
    live.reload_str(&GOOD.replace("events = 100", "events = 200"))
        .unwrap();
    for _ in 0..120 {
        assert!(volume.try_acquire("tenant", 1).is_ok());
    }
    assert!(volume.try_acquire("tenant", 1).is_err(), "200 of 200");
}

/// A reload signal is handled on another thread than the decisions: the handle is shared.
#[test]
fn the_handle_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<LiveLimits>();
    shared::<LiveLimits<ManualClock>>();
}

/// A refused reload handed a drained identity 99 tokens: it cut class 0 and added an override
/// while another thread took the last free override slot; the override was refused after the
/// cut was applied, and the undo (a revert of the cut) forgave alice's debt. Raced 300 times:
/// whichever thread wins the slot, alice is granted nothing at the reading she drained at.
#[test]
fn a_reload_refused_by_a_racing_setter_leaves_every_actor_as_it_was() {
    const BEFORE: &str = r#"
[admit.limiter]
cap = 64

[[admit.limiter.class]]
burst = 100
rate = "100/s"

[admit.in_flight]
quota = 4
actors = 256
override_capacity = 2
overrides = { importer = 16 }
"#;
    let after = BEFORE
        .replace("burst = 100\nrate = \"100/s\"", "burst = 1\nrate = \"1/s\"")
        .replace("importer = 16", "importer = 16, newcomer = 1");
    let mut refused = 0;
    for _ in 0..300 {
        let (live, _clock) = live(BEFORE);
        let limiter = live.limiter().unwrap().clone();
        let quotas = live.in_flight().unwrap().clone();
        assert!(limiter.try_acquire_n("alice", 0, 100).is_ok());
        let start = std::sync::Barrier::new(2);
        let reloaded = std::thread::scope(|s| {
            let reload = s.spawn(|| {
                start.wait();
                live.reload_str(&after)
            });
            start.wait();
            let _ = quotas.set_override("rival", Some(1));
            reload.join().unwrap()
        });
        if reloaded.is_err() {
            refused += 1;
            assert_eq!(
                limiter.config(0),
                Some(BucketConfig::per_second(100).unwrap())
            );
        }
        let mut granted = 0;
        while limiter.try_acquire("alice", 0).is_ok() {
            granted += 1;
        }
        assert_eq!(
            granted, 0,
            "alice was handed tokens by a reload that was refused or applied"
        );
    }
    // Both outcomes happen over 300 runs on any machine that runs threads at all; say which.
    println!("refused reloads: {refused} of 300");
}
