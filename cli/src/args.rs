//! Argument checks shared by the subcommands, run by clap so a malformed value is a usage
//! error (exit status 2) like any other.

/// An RFC 3339 time such as `2026-12-01T09:30:00Z`, kept as given (the `shared` request types
/// take the text).
///
/// # Errors
/// The reason, when `value` is not RFC 3339 (`shared::timestamp::parse_rfc3339`).
pub fn rfc3339(value: &str) -> Result<String, String> {
    shared::timestamp::parse_rfc3339(value).map(|_| value.to_owned())
}

/// A duration as `<n>m`, `<n>h` or `<n>d` (minutes, hours, days), e.g. `90m`, `24h`, `7d`: at
/// least one minute, at most 3650 days.
///
/// # Errors
/// The reason, when `value` is not one.
pub fn duration(value: &str) -> Result<std::time::Duration, String> {
    const MAX_SECS: u64 = 3650 * 86_400;
    let bad = || format!("{value:?} is not a duration such as 90m, 24h or 7d");
    let value = value.trim();
    let split = value.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = value.split_at(split);
    let unit_secs = match unit {
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let number: u64 = match number.parse() {
        Ok(n) if n > 0 && number.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => return Err(bad()),
    };
    match number.checked_mul(unit_secs) {
        Some(secs) if secs <= MAX_SECS => Ok(std::time::Duration::from_secs(secs)),
        _ => Err(format!("{value:?} is longer than 3650 days")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_in_minutes_hours_and_days_and_nothing_else() {
        assert_eq!(duration("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(duration("3650d"), Ok(Duration::from_secs(3650 * 86_400)));
        for bad in [
            "",
            "h",
            "0h",
            "-1h",
            "+1h",
            "1.5h",
            "1w",
            "24",
            "h24",
            "3651d",
            "99999999999999999999d",
        ] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }
}
