//! The limits file: parsing and key-naming errors.

use super::*;
use crate::bucket::BucketConfigError;
use crate::quota::RateLimitConfigError;
use std::time::Duration;

const FULL: &str = r#"
[registrar]
listen = "/run/registrar.sock"

[admit.limiter]
cap = 4096

[[admit.limiter.class]]
burst = 20
rate = "10/s"

[[admit.limiter.class]]
burst = 5
interval = "12s"
shadow = true

[admit.in_flight]
quota = 8
actors = 2048
overrides = { importer = 32, "two words" = "unlimited" }

[admit.volume]
events = 1200
bytes = 8388608
window = "60s"
rows = 2
shadow = true

[admit.bucket]
burst = 100
rate = "50/s"
"#;

fn key_error(document: &str) -> (String, KeyProblem, String) {
    match LimitsConfig::from_toml_str(document) {
        Err(err @ LimitsConfigError::Key { .. }) => {
            let message = err.to_string();
            let LimitsConfigError::Key { key, problem } = err else {
                unreachable!()
            };
            (key, problem, message)
        }
        other => panic!("expected a key error, got {other:?}"),
    }
}

#[test]
fn a_full_file_reads_every_key() {
    let config = LimitsConfig::from_toml_str(FULL).unwrap();
    let limiter = config.limiter.unwrap();
    assert_eq!(limiter.cap, 4096);
    assert_eq!(limiter.classes.len(), 2);
    let class0 = &limiter.classes[0];
    assert_eq!(
        class0.config,
        BucketConfig::per_second(10)
            .unwrap()
            .with_burst(20)
            .unwrap()
    );
    assert!(!class0.shadow);
    let class1 = &limiter.classes[1];
    assert_eq!(
        class1.config,
        BucketConfig::new(5, Duration::from_secs(12)).unwrap()
    );
    assert!(class1.shadow);
    let in_flight = config.in_flight.unwrap();
    assert_eq!((in_flight.quota, in_flight.actors), (8, 2048));
    assert_eq!(in_flight.overrides.get("importer"), Some(&32));
    assert_eq!(
        in_flight.overrides.get("two words"),
        Some(&crate::fairness::UNLIMITED)
    );
    assert!(!in_flight.shadow);
    let volume = config.volume.unwrap();
    assert_eq!(
        volume.quota,
        crate::quota::Quota::new(1200, 8 << 20, Duration::from_secs(60))
            .unwrap()
            .with_rows(2)
            .unwrap()
    );
    assert!(volume.shadow);
    let bucket = config.bucket.unwrap();
    assert_eq!(
        bucket.config,
        BucketConfig::per_second(50)
            .unwrap()
            .with_burst(100)
            .unwrap()
    );
}

#[test]
fn no_admit_table_is_an_empty_config() {
    assert_eq!(
        LimitsConfig::from_toml_str("[registrar]\nx = 1\n").unwrap(),
        LimitsConfig::default()
    );
}

#[test]
fn defaults_for_the_optional_keys() {
    let config = LimitsConfig::from_toml_str(
        "[[admit.limiter.class]]\nburst = 1\nrate = \"1/s\"\n[admit.in_flight]\nquota = 4\n\
         [admit.volume]\nevents = 1\nbytes = 1\nwindow = \"1s\"\n",
    )
    .unwrap();
    assert_eq!(config.limiter.unwrap().cap, crate::DEFAULT_CAP);
    assert_eq!(
        config.in_flight.unwrap().actors,
        crate::fairness::DEFAULT_ACTORS
    );
    assert_eq!(
        config.volume.unwrap().quota.rows(),
        crate::quota::Quota::DEFAULT_ROWS
    );
}

#[test]
fn the_issue_example_message() {
    let (key, problem, message) = key_error(
        "[[admit.limiter.class]]\nburst = 1\nrate = \"1/s\"\n\
         [[admit.limiter.class]]\nburst = 20\nrate = \"10/m\"\n",
    );
    assert_eq!(key, "admit.limiter.class[1].rate");
    assert_eq!(
        problem,
        KeyProblem::NotARate {
            value: "10/m".into()
        }
    );
    assert_eq!(
        message,
        "admit.limiter.class[1].rate: \"10/m\" is not a rate: write N/s, N/min, N/h or N/d"
    );
}

#[test]
fn an_unknown_key_is_named_wherever_it_is() {
    for (document, want) in [
        ("[admit]\nlimitter = 1\n", "admit.limitter"),
        ("[admit.limiter]\ncapp = 1\n", "admit.limiter.capp"),
        (
            "[[admit.limiter.class]]\nburst = 1\nrate = \"1/s\"\nbrust = 2\n",
            "admit.limiter.class[0].brust",
        ),
        (
            "[[admit.limiter.class]]\nburst = 1\nrate = \"1/s\"\noverflow = { burst = 1 }\n",
            "admit.limiter.class[0].overflow",
        ),
        (
            "[admit.in_flight]\nquota = 1\nquotas = 2\n",
            "admit.in_flight.quotas",
        ),
        ("[admit.volume]\nevent = 1\n", "admit.volume.event"),
        (
            "[admit.bucket]\nburst = 1\nrate = \"1/s\"\nshadows = true\n",
            "admit.bucket.shadows",
        ),
    ] {
        let (key, problem, message) = key_error(document);
        assert_eq!(key, want, "{document}");
        assert!(matches!(problem, KeyProblem::Unknown { .. }), "{document}");
        assert!(
            message.starts_with(&format!("{want}: is not a key")),
            "{message}"
        );
    }
}

#[test]
fn rate_and_interval_together_are_refused() {
    let (key, problem, _) =
        key_error("[admit.bucket]\nburst = 1\nrate = \"1/s\"\ninterval = \"1s\"\n");
    assert_eq!(
        (key.as_str(), problem),
        ("admit.bucket", KeyProblem::RateAndInterval)
    );
    let (key, problem, _) = key_error("[admit.bucket]\nburst = 1\n");
    assert_eq!(
        (key.as_str(), problem),
        ("admit.bucket", KeyProblem::NoRate)
    );
}

#[test]
fn each_bad_value_names_its_key() {
    let cases: &[(&str, &str)] = &[
        ("[admit.bucket]\nrate = \"1/s\"\n", "admit.bucket.burst"),
        (
            "[admit.bucket]\nburst = 0\nrate = \"1/s\"\n",
            "admit.bucket.burst",
        ),
        (
            "[admit.bucket]\nburst = -1\nrate = \"1/s\"\n",
            "admit.bucket.burst",
        ),
        (
            "[admit.bucket]\nburst = 4294967296\nrate = \"1/s\"\n",
            "admit.bucket.burst",
        ),
        (
            "[admit.bucket]\nburst = 1.5\nrate = \"1/s\"\n",
            "admit.bucket.burst",
        ),
        (
            "[admit.bucket]\nburst = 1\nrate = \"3/s\"\n",
            "admit.bucket.rate",
        ),
        (
            "[admit.bucket]\nburst = 1\nrate = 10\n",
            "admit.bucket.rate",
        ),
        (
            "[admit.bucket]\nburst = 1\ninterval = \"1.5s\"\n",
            "admit.bucket.interval",
        ),
        (
            "[admit.bucket]\nburst = 1\ninterval = \"0ms\"\n",
            "admit.bucket.interval",
        ),
        (
            "[admit.bucket]\nburst = 1\nrate = \"1/s\"\nshadow = \"yes\"\n",
            "admit.bucket.shadow",
        ),
        (
            "[admit.bucket]\nburst = 4294967295\ninterval = \"1h\"\n",
            "admit.bucket.burst",
        ),
        ("[admit.limiter]\ncap = 1\n", "admit.limiter.class"),
        (
            "[admit.limiter]\ncap = -1\nclass = []\n",
            "admit.limiter.cap",
        ),
        ("[admit.limiter]\nclass = 3\n", "admit.limiter.class"),
        ("[admit.in_flight]\nactors = 1\n", "admit.in_flight.quota"),
        ("[admit.in_flight]\nquota = 0\n", "admit.in_flight.quota"),
        (
            "[admit.in_flight]\nquota = \"lots\"\n",
            "admit.in_flight.quota",
        ),
        (
            "[admit.in_flight]\nquota = 1\noverrides = { \"a b\" = 0 }\n",
            "admit.in_flight.overrides.\"a b\"",
        ),
        (
            "[admit.volume]\nbytes = 1\nwindow = \"1s\"\n",
            "admit.volume.events",
        ),
        (
            "[admit.volume]\nevents = 0\nbytes = 1\nwindow = \"1s\"\n",
            "admit.volume.events",
        ),
        (
            "[admit.volume]\nevents = 1\nbytes = 16777216\nwindow = \"1s\"\n",
            "admit.volume.bytes",
        ),
        (
            "[admit.volume]\nevents = 1\nbytes = 1\nwindow = \"0s\"\n",
            "admit.volume.window",
        ),
        (
            "[admit.volume]\nevents = 1\nbytes = 1\nwindow = 60\n",
            "admit.volume.window",
        ),
        (
            "[admit.volume]\nevents = 1\nbytes = 1\nwindow = \"1s\"\nrows = 3\n",
            "admit.volume.rows",
        ),
        ("admit = 3\n", "admit"),
        ("[admit]\nbucket = 3\n", "admit.bucket"),
    ];
    for (document, want) in cases {
        let (key, _, message) = key_error(document);
        assert_eq!(&key, want, "{document}: {message}");
        assert!(message.starts_with(&format!("{want}: ")), "{message}");
    }
}

#[test]
fn refusals_carry_the_primitive_reason() {
    let (_, problem, _) = key_error("[admit.bucket]\nburst = 0\nrate = \"1/s\"\n");
    assert_eq!(problem, KeyProblem::Bucket(BucketConfigError::ZeroBurst));
    let (_, problem, _) =
        key_error("[admit.volume]\nevents = 1\nbytes = 1\nwindow = \"1s\"\nrows = 3\n");
    assert_eq!(
        problem,
        KeyProblem::Volume(RateLimitConfigError::RowsNotPowerOfTwo { rows: 3 })
    );
}

#[test]
fn syntax_and_missing_file_are_typed() {
    assert!(matches!(
        LimitsConfig::from_toml_str("[admit\n"),
        Err(LimitsConfigError::Syntax { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let err = LimitsConfig::load(&path).unwrap_err();
    assert!(matches!(&err, LimitsConfigError::Read { path: p, .. } if *p == path));
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn the_documented_example_file_parses_whole() {
    let config =
        LimitsConfig::from_toml_str(include_str!("../../docs/admit.example.toml")).unwrap();
    let limiter = config.limiter.unwrap();
    assert_eq!((limiter.cap, limiter.classes.len()), (4096, 2));
    assert!(limiter.classes[1].shadow);
    assert_eq!(
        config.in_flight.unwrap().overrides.get("importer"),
        Some(&32)
    );
    assert_eq!(config.volume.unwrap().quota, crate::quota::Quota::default());
    assert_eq!(config.bucket.unwrap().config.burst(), 100);
}
