//! Loading the four keys from a `[registrar]` TOML table (feature `config`).

use super::{RateLimitKey, RegistrarConfig, RegistrarConfigError, ValueProblem};
use std::path::Path;
use toml::de::{DeTable, DeValue};
use toml::{Table, Value};

/// The `[registrar]` table, loaded: the four keys validated, every other key as it was.
///
/// ```
/// use admit::registrar::RegistrarConfig;
///
/// let loaded = RegistrarConfig::from_toml_str(
///     "[registrar]\nrate_limit_admission_burst = 64\nlisten = \"/run/registrar.sock\"\n",
/// )?;
/// assert_eq!(loaded.config.rate_limit_admission_burst, 64);
/// assert!(loaded.other_keys.contains_key("listen"), "other keys are kept, never rejected");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub struct LoadedRegistrar {
    /// The four `rate_limit_*` keys, validated; defaults for absent ones.
    pub config: RegistrarConfig,
    /// Every other key of the `[registrar]` table, untouched (empty if there is no table).
    pub other_keys: Table,
}

#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
impl RegistrarConfig {
    /// Reads the four keys from an already parsed `[registrar]` table, defaults for absent
    /// ones, and validates them. Other keys are ignored, never rejected.
    pub fn from_registrar_table(table: &Table) -> Result<Self, RegistrarConfigError> {
        let mut config = Self::default();
        for key in RateLimitKey::ALL {
            if let Some(value) = table.get(key.name()) {
                config.set(key, read_value(key, value)?);
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Parses a whole configuration document and loads its `[registrar]` table (defaults if
    /// it has none).
    ///
    /// The table is shared: other parts of the daemon keep their own keys in it (the audit
    /// record directory and its rotation bounds, the audit store's keys, and more arriving
    /// later). The loader reads its four keys by hand from the parsed values, so that every
    /// bad value becomes a [`RegistrarConfigError`] naming the key instead of a raw deserialisation
    /// error, and hands every other key back untouched: it neither rejects nor rewrites a key
    /// it does not know.
    ///
    /// A consequence worth knowing: a misspelt `rate_limit_*` key is an unknown key, so it is
    /// kept in [`LoadedRegistrar::other_keys`] and the default applies. A daemon that wants to
    /// warn about it can look there.
    pub fn from_toml_str(document: &str) -> Result<LoadedRegistrar, RegistrarConfigError> {
        let mut root: Table = match document.parse() {
            Ok(root) => root,
            Err(err) => return Err(explain_parse_failure(document, err)),
        };
        let mut other_keys = match root.remove("registrar") {
            None => Table::new(),
            Some(Value::Table(table)) => table,
            Some(other) => {
                return Err(RegistrarConfigError::NotATable {
                    found: other.type_str(),
                })
            }
        };
        let config = Self::from_registrar_table(&other_keys)?;
        for key in RateLimitKey::ALL {
            other_keys.remove(key.name());
        }
        Ok(LoadedRegistrar { config, other_keys })
    }

    /// Reads the configuration file at `path` and loads its `[registrar]` table.
    pub fn load(path: impl AsRef<Path>) -> Result<LoadedRegistrar, RegistrarConfigError> {
        let path = path.as_ref();
        let document = std::fs::read_to_string(path).map_err(|err| RegistrarConfigError::Read {
            path: path.to_owned(),
            message: err.to_string(),
        })?;
        Self::from_toml_str(&document)
    }
}

/// One key's value as a `u32`, or the named error. Zero passes here and is refused by
/// [`RegistrarConfig::validate`], so the rule lives in one place.
fn read_value(key: RateLimitKey, value: &Value) -> Result<u32, RegistrarConfigError> {
    let invalid = |problem| RegistrarConfigError::InvalidValue {
        key,
        found: value.to_string(),
        problem,
    };
    match value {
        Value::Integer(n) if *n < 0 => Err(invalid(ValueProblem::Negative)),
        Value::Integer(n) => u32::try_from(*n).map_err(|_| invalid(ValueProblem::TooLarge)),
        other => Err(invalid(ValueProblem::NotAnInteger {
            found: other.type_str(),
        })),
    }
}

/// A document that does not parse. TOML integers are 64-bit, so a value of one of the four
/// keys beyond that range fails the whole parse; name the key then, as for any other value
/// out of range. Anything else is a syntax error, reported with the parser's line and column.
#[cold]
fn explain_parse_failure(document: &str, err: toml::de::Error) -> RegistrarConfigError {
    let syntax = || RegistrarConfigError::Syntax {
        message: err.to_string(),
    };
    // The lossless parser keeps integers as written, so it accepts what the first refused.
    let Ok(root) = DeTable::parse(document) else {
        return syntax();
    };
    let Some(DeValue::Table(registrar)) = entry(root.get_ref(), "registrar") else {
        return syntax();
    };
    for key in RateLimitKey::ALL {
        if let Some(DeValue::Integer(n)) = entry(registrar, key.name()) {
            if i64::from_str_radix(n.as_str(), n.radix()).is_err() {
                let problem = if n.as_str().starts_with('-') {
                    ValueProblem::Negative
                } else {
                    ValueProblem::TooLarge
                };
                return RegistrarConfigError::InvalidValue {
                    key,
                    found: n.to_string(),
                    problem,
                };
            }
        }
    }
    syntax()
}

fn entry<'t, 'i>(table: &'t DeTable<'i>, name: &str) -> Option<&'t DeValue<'i>> {
    table
        .iter()
        .find(|(key, _)| key.get_ref().as_ref() == name)
        .map(|(_, value)| value.get_ref())
}
