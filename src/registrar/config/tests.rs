//! The four keys: defaults, zero in each, bad values named by key, unrelated keys untouched.

use super::*;
use std::time::Duration;

#[test]
fn defaults_are_the_documented_numbers() {
    let config = RegistrarConfig::default();
    assert_eq!(config.rate_limit_admission_burst, 512);
    assert_eq!(config.rate_limit_admission_refill_interval_ms, 500);
    assert_eq!(config.rate_limit_predecision_refusal_burst, 32);
    assert_eq!(
        config.rate_limit_predecision_refusal_refill_interval_ms,
        1_000
    );
    assert_eq!(config.validate(), Ok(()));
    let admission = config.bucket_config(Bucket::Admission).unwrap();
    assert_eq!(
        (admission.burst(), admission.refill_interval()),
        (512, Duration::from_millis(500))
    );
    let refusal = config.bucket_config(Bucket::PredecisionRefusal).unwrap();
    assert_eq!(
        (refusal.burst(), refusal.refill_interval()),
        (32, Duration::from_secs(1))
    );
}

#[test]
fn get_and_set_reach_the_field_each_key_names() {
    let mut config = RegistrarConfig::default();
    for (i, key) in RateLimitKey::ALL.into_iter().enumerate() {
        assert_eq!(config.get(key), key.default_value());
        config.set(key, 7 + i as u32);
    }
    assert_eq!(
        config,
        RegistrarConfig {
            rate_limit_admission_burst: 7,
            rate_limit_admission_refill_interval_ms: 8,
            rate_limit_predecision_refusal_burst: 9,
            rate_limit_predecision_refusal_refill_interval_ms: 10,
        }
    );
}

#[test]
fn zero_is_refused_in_each_key_with_the_key_and_the_reason() {
    for key in RateLimitKey::ALL {
        let mut config = RegistrarConfig::default();
        config.set(key, 0);
        let err = config.validate().unwrap_err();
        assert_eq!(err.key(), Some(key));
        assert!(matches!(
            err,
            RegistrarConfigError::InvalidValue {
                problem: ValueProblem::Zero,
                ..
            }
        ));
        let message = err.to_string();
        assert!(message.contains(key.name()), "{message}");
        let why = if key.is_burst() {
            "first"
        } else {
            "silently disables the limiter"
        };
        assert!(message.contains(why), "{message}");
    }
    let config = RegistrarConfig {
        rate_limit_admission_burst: 0,
        ..RegistrarConfig::default()
    };
    assert!(config
        .validate()
        .unwrap_err()
        .to_string()
        .contains("throttles the very first legitimate mint"));
}

#[test]
fn a_span_too_long_to_represent_names_both_keys() {
    let config = RegistrarConfig {
        rate_limit_admission_burst: u32::MAX,
        rate_limit_admission_refill_interval_ms: u32::MAX,
        ..RegistrarConfig::default()
    };
    let err = config.validate().unwrap_err();
    assert!(matches!(
        err,
        RegistrarConfigError::RefillSpanTooLong {
            bucket: Bucket::Admission,
            ..
        }
    ));
    let message = err.to_string();
    assert!(message.contains("rate_limit_admission_burst"), "{message}");
    assert!(
        message.contains("rate_limit_admission_refill_interval_ms"),
        "{message}"
    );
}

#[cfg(feature = "config")]
mod toml_loading {
    use super::*;
    use std::io::Write;

    fn load(registrar: &str) -> Result<LoadedRegistrar, RegistrarConfigError> {
        RegistrarConfig::from_toml_str(&format!("[registrar]\n{registrar}\n"))
    }

    fn invalid(registrar: &str) -> (RateLimitKey, ValueProblem, String) {
        match load(registrar) {
            Err(
                ref err @ RegistrarConfigError::InvalidValue {
                    key,
                    problem,
                    ref found,
                },
            ) => {
                let message = err.to_string();
                assert!(message.contains(key.name()), "{message}");
                assert!(message.contains(found.as_str()), "{message}");
                (key, problem, found.clone())
            }
            other => panic!("{registrar}: expected a named invalid value, got {other:?}"),
        }
    }

    #[test]
    fn an_absent_table_or_absent_keys_load_the_defaults() {
        let loaded = RegistrarConfig::from_toml_str("").unwrap();
        assert_eq!(loaded.config, RegistrarConfig::default());
        assert!(loaded.other_keys.is_empty());
        let loaded = RegistrarConfig::from_toml_str("[other]\nx = 1\n").unwrap();
        assert_eq!(loaded.config, RegistrarConfig::default());
        let loaded = load("").unwrap();
        assert_eq!(loaded.config, RegistrarConfig::default());
    }

    #[test]
    fn the_four_keys_load_as_written() {
        let loaded = load(
            "rate_limit_admission_burst = 2400\n\
             rate_limit_admission_refill_interval_ms = 250\n\
             rate_limit_predecision_refusal_burst = 0x10\n\
             rate_limit_predecision_refusal_refill_interval_ms = 2_000",
        )
        .unwrap();
        assert_eq!(
            loaded.config,
            RegistrarConfig {
                rate_limit_admission_burst: 2_400,
                rate_limit_admission_refill_interval_ms: 250,
                rate_limit_predecision_refusal_burst: 16,
                rate_limit_predecision_refusal_refill_interval_ms: 2_000,
            }
        );
        assert!(
            loaded.other_keys.is_empty(),
            "the loader's own keys are not 'other'"
        );
    }

    #[test]
    fn zero_in_each_key_is_refused_by_name() {
        for key in RateLimitKey::ALL {
            let (named, problem, found) = invalid(&format!("{} = 0", key.name()));
            assert_eq!(
                (named, problem, found.as_str()),
                (key, ValueProblem::Zero, "0")
            );
        }
    }

    #[test]
    fn negative_fractional_string_and_too_large_values_are_named_errors() {
        let key = RateLimitKey::AdmissionBurst;
        let cases: [(&str, ValueProblem); 9] = [
            ("-1", ValueProblem::Negative),
            ("-9223372036854775808", ValueProblem::Negative),
            ("-99999999999999999999", ValueProblem::Negative),
            ("1.5", ValueProblem::NotAnInteger { found: "float" }),
            ("512.0", ValueProblem::NotAnInteger { found: "float" }),
            ("\"512\"", ValueProblem::NotAnInteger { found: "string" }),
            ("4294967296", ValueProblem::TooLarge),
            ("9223372036854775807", ValueProblem::TooLarge),
            ("99999999999999999999", ValueProblem::TooLarge),
        ];
        for (value, expected) in cases {
            let (named, problem, _) = invalid(&format!("{} = {value}", key.name()));
            assert_eq!((named, problem), (key, expected), "{value}");
        }
        // Every other TOML kind, and the same rules for an interval key.
        let interval = RateLimitKey::PredecisionRefusalRefillIntervalMs;
        for (value, kind) in [
            ("true", "boolean"),
            ("1979-05-27", "datetime"),
            ("[1]", "array"),
            ("{ ms = 1 }", "table"),
            ("nan", "float"),
            ("-inf", "float"),
        ] {
            let (named, problem, _) = invalid(&format!("{} = {value}", interval.name()));
            assert_eq!(
                (named, problem),
                (interval, ValueProblem::NotAnInteger { found: kind })
            );
        }
        // The largest value fits.
        assert_eq!(
            load(&format!("{} = 4294967295", interval.name()))
                .unwrap()
                .config
                .get(interval),
            u32::MAX
        );
    }

    #[test]
    fn unrelated_keys_load_and_come_back_untouched() {
        let registrar = "audit_record_dir = \"/var/lib/registrar/audit\"\n\
                         audit_record_rotate_bytes = 67108864\n\
                         audit_record_keep_files = 8\n\
                         audit_store_reserved_bytes = 1073741824\n\
                         audit_store_low_water_percent = 10\n\
                         rate_limit_coalesce_window_seconds = 60\n\
                         rate_limit_admission_burst = 600\n\
                         [registrar.future]\n\
                         nested = [1, 2.5, \"x\"]";
        let loaded = load(registrar).unwrap();
        assert_eq!(loaded.config.rate_limit_admission_burst, 600);
        let document: toml::Table = format!("[registrar]\n{registrar}\n").parse().unwrap();
        let mut expected = document["registrar"].as_table().unwrap().clone();
        assert!(expected.remove("rate_limit_admission_burst").is_some());
        assert_eq!(loaded.other_keys, expected);
        assert_eq!(
            loaded.other_keys["rate_limit_coalesce_window_seconds"].as_integer(),
            Some(60)
        );
        assert_eq!(
            loaded.other_keys["audit_record_dir"].as_str(),
            Some("/var/lib/registrar/audit")
        );
        // An unrelated key holding what the four keys refuse is still not ours to refuse.
        let loaded = load("audit_record_keep_files = -1\nrate_limit_x = 1.5").unwrap();
        assert_eq!(loaded.other_keys.len(), 2);
    }

    #[test]
    fn a_registrar_entry_that_is_not_a_table_and_bad_toml_are_named() {
        assert_eq!(
            RegistrarConfig::from_toml_str("registrar = 5").unwrap_err(),
            RegistrarConfigError::NotATable { found: "integer" }
        );
        let err = RegistrarConfig::from_toml_str("[registrar\n").unwrap_err();
        assert!(
            matches!(err, RegistrarConfigError::Syntax { .. }),
            "{err:?}"
        );
        // A too-large integer elsewhere is invalid TOML, not ours to name.
        let err = load("audit_record_keep_files = 99999999999999999999").unwrap_err();
        assert!(
            matches!(err, RegistrarConfigError::Syntax { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn a_file_loads_and_a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registrar.toml");
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(
            file,
            "[registrar]\naudit_record_dir = \"audit\"\nrate_limit_admission_burst = 2400"
        )
        .unwrap();
        drop(file);
        let loaded = RegistrarConfig::load(&path).unwrap();
        assert_eq!(loaded.config.rate_limit_admission_burst, 2_400);
        assert_eq!(
            loaded.other_keys["audit_record_dir"].as_str(),
            Some("audit")
        );

        let missing = dir.path().join("absent.toml");
        let err = RegistrarConfig::load(&missing).unwrap_err();
        assert!(matches!(err, RegistrarConfigError::Read { .. }));
        assert!(err.to_string().contains("absent.toml"), "{err}");
    }

    #[test]
    fn from_registrar_table_ignores_unknown_keys() {
        let table: toml::Table = "audit_record_dir = \"x\"\nrate_limit_admission_burst = 9"
            .parse()
            .unwrap();
        let config = RegistrarConfig::from_registrar_table(&table).unwrap();
        assert_eq!(config.rate_limit_admission_burst, 9);
    }
}
