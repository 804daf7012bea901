//! The two value forms a limits file writes in words: a rate (`"10/s"`) and a duration
//! (`"100ms"`). Whole numbers only, as everywhere in the crate's configuration.

use std::time::Duration;

/// `"N/s"`, `"N/min"`, `"N/h"` or `"N/d"`: `N` tokens per period. `None` for anything else
/// (`"10/m"` is refused: minutes or milliseconds?).
pub(super) fn parse_rate(text: &str) -> Option<(u32, Duration)> {
    let (count, unit) = text.trim().split_once('/')?;
    let period = match unit.trim() {
        "s" => Duration::from_secs(1),
        "min" => Duration::from_secs(60),
        "h" => Duration::from_secs(3_600),
        "d" => Duration::from_secs(86_400),
        _ => return None,
    };
    Some((u32::try_from(whole(count.trim())?).ok()?, period))
}

/// A whole number and a unit: `us` (or `µs`), `ms`, `s`, `min`, `h`, `d`. `None` for anything
/// else, a fraction or a missing unit included.
pub(super) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (count, unit) = text.split_at(split);
    let count = whole(count)?;
    match unit.trim() {
        "us" | "µs" => Some(Duration::from_micros(count)),
        "ms" => Some(Duration::from_millis(count)),
        "s" => Some(Duration::from_secs(count)),
        "min" => Some(Duration::from_secs(count.checked_mul(60)?)),
        "h" => Some(Duration::from_secs(count.checked_mul(3_600)?)),
        "d" => Some(Duration::from_secs(count.checked_mul(86_400)?)),
        _ => None,
    }
}

/// Decimal digits only (no sign, no fraction, no separator), within `u64`.
fn whole(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10/s"), Some((10, Duration::from_secs(1))));
        assert_eq!(parse_rate(" 5 / min "), Some((5, Duration::from_secs(60))));
        assert_eq!(parse_rate("100/h"), Some((100, Duration::from_secs(3_600))));
        assert_eq!(
            parse_rate("10000/d"),
            Some((10_000, Duration::from_secs(86_400)))
        );
        for bad in [
            "10/m",
            "10",
            "/s",
            "1.5/s",
            "-1/s",
            "10/sec",
            "ten/s",
            "99999999999/s",
        ] {
            assert_eq!(parse_rate(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Some(Duration::from_millis(100)));
        assert_eq!(parse_duration("250us"), Some(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Some(Duration::from_micros(250)));
        assert_eq!(parse_duration("2 min"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3_600)));
        assert_eq!(parse_duration("2d"), Some(Duration::from_secs(172_800)));
        for bad in ["100", "1.5s", "-1s", "s", "10m", "", "1 day"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
