//! Sizing the admission burst from the legitimate fan-out, not from "mints are rare".
//!
//! There is effectively one registrar identity (the control plane), so "per identity" is
//! close to global, and an ordinary bring-up (an onboarding wave of hosts, several modules
//! on each) is a burst of mints from that one identity. The burst must cover it:
//!
//! ```text
//! rate_limit_admission_burst >= wave_hosts × modules_per_host
//! ```
//!
//! where `wave_hosts` is the largest number of hosts brought up at once and
//! `modules_per_host` the largest number of components on one host. The default, 512, is the
//! reference deployment's 64 hosts × 8 modules. A larger wave is not refused: it completes as
//! tokens accrue, taking `(mints − burst) × rate_limit_admission_refill_interval_ms / 1000`
//! extra seconds, provided its callers honour the retry-after and keep requests outstanding.
//! For 200 hosts × 12 modules at the defaults that is `(2400 − 512) × 500 / 1000 = 944` s, so
//! such a fleet raises the burst to at least 2400 before its first bring-up.

use super::config::{RateLimitKey, RegistrarConfig};
use std::fmt;

/// Whether the admission burst covers a bring-up wave, and what it costs if not.
///
/// ```
/// use admit::registrar::{size_wave, RegistrarConfig};
///
/// // 200 hosts × 4 modules against the default admission burst (512, one back every 500 ms).
/// let wave = size_wave(&RegistrarConfig::default(), 200, 4);
/// assert_eq!(wave.mints(), 800);
/// assert!(!wave.covered());
/// assert_eq!(wave.shortfall(), 288);
/// println!("{wave}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveSizing {
    wave_hosts: u32,
    modules_per_host: u32,
    burst: u32,
    refill_interval_ms: u32,
}

/// Sizes a wave of `wave_hosts` hosts × `modules_per_host` modules against `config`'s
/// admission burst and refill interval.
pub fn size_wave(config: &RegistrarConfig, wave_hosts: u32, modules_per_host: u32) -> WaveSizing {
    WaveSizing {
        wave_hosts,
        modules_per_host,
        burst: config.rate_limit_admission_burst,
        refill_interval_ms: config.rate_limit_admission_refill_interval_ms,
    }
}

impl WaveSizing {
    /// Mints in the wave, `wave_hosts × modules_per_host`: also the smallest burst that
    /// covers it.
    pub fn mints(&self) -> u64 {
        u64::from(self.wave_hosts) * u64::from(self.modules_per_host)
    }

    /// Whether the burst covers the whole wave: no mint in it is throttled.
    pub fn covered(&self) -> bool {
        self.mints() <= u64::from(self.burst)
    }

    /// Mints beyond the burst, `mints − burst` (zero when covered).
    pub fn shortfall(&self) -> u64 {
        self.mints().saturating_sub(u64::from(self.burst))
    }

    /// Extra time the wave takes, `shortfall × refill_interval_ms`, in milliseconds.
    pub fn extra_ms(&self) -> u64 {
        self.shortfall()
            .saturating_mul(u64::from(self.refill_interval_ms))
    }

    /// [`WaveSizing::extra_ms`] in whole seconds, rounded up: the formula's
    /// `(mints − burst) × interval_ms / 1000`, never understated.
    pub fn extra_secs(&self) -> u64 {
        self.extra_ms().div_ceil(1_000)
    }
}

impl fmt::Display for WaveSizing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let burst_key = RateLimitKey::AdmissionBurst;
        write!(
            f,
            "{} hosts × {} modules = {} mints: ",
            self.wave_hosts,
            self.modules_per_host,
            self.mints()
        )?;
        if self.covered() {
            write!(f, "covered by {burst_key} = {}", self.burst)
        } else {
            write!(
                f,
                "{} more than {burst_key} = {}; the wave takes {} s longer ({} × {} ms); set \
                 {burst_key} to at least {} to avoid that",
                self.shortfall(),
                self.burst,
                self.extra_secs(),
                self.shortfall(),
                self.refill_interval_ms,
                self.mints()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_wave_is_covered_by_the_default() {
        let sizing = size_wave(&RegistrarConfig::default(), 64, 8);
        assert_eq!(sizing.mints(), 512);
        assert!(sizing.covered());
        assert_eq!((sizing.shortfall(), sizing.extra_secs()), (0, 0));
        assert!(!size_wave(&RegistrarConfig::default(), 65, 8).covered());
    }

    #[test]
    fn a_larger_wave_takes_the_documented_extra_seconds() {
        let sizing = size_wave(&RegistrarConfig::default(), 200, 12);
        assert_eq!(sizing.mints(), 2_400);
        assert!(!sizing.covered());
        assert_eq!(sizing.shortfall(), 1_888);
        assert_eq!(sizing.extra_ms(), 944_000);
        assert_eq!(sizing.extra_secs(), 944);
        let raised = RegistrarConfig {
            rate_limit_admission_burst: 2_400,
            ..RegistrarConfig::default()
        };
        assert!(size_wave(&raised, 200, 12).covered());
    }

    #[test]
    fn extra_seconds_round_up_and_never_overflow() {
        // One mint over at 500 ms per token: half a second, reported as 1 s.
        let sizing = size_wave(&RegistrarConfig::default(), 513, 1);
        assert_eq!((sizing.extra_ms(), sizing.extra_secs()), (500, 1));
        let huge = RegistrarConfig {
            rate_limit_admission_burst: 1,
            rate_limit_admission_refill_interval_ms: u32::MAX,
            ..RegistrarConfig::default()
        };
        let sizing = size_wave(&huge, u32::MAX, u32::MAX);
        assert_eq!(sizing.mints(), u64::from(u32::MAX) * u64::from(u32::MAX));
        assert_eq!(sizing.extra_ms(), u64::MAX);
    }
}
