//! Timestamps in the model's units: unix seconds, unix milliseconds, RFC 3339 date-times.

use super::config::TimestampUnit;
use crate::header::parse_unix_seconds;

/// The unix seconds of `text` written in `unit` (milliseconds are truncated to the second;
/// an RFC 3339 time with an offset is converted to UTC). `None` if it is not in that unit.
///
/// With `canonical`, digits must be canonical: no leading zero (`0` itself aside). Otherwise
/// `01700000000` would be the same time as `1700000000` in other text, and a template that
/// puts a variable part right before `{timestamp}` would let a captured signature move a digit
/// between them ([`super::config::Parsed::timestamp_canonical`] says when). Elsewhere the
/// text is signed as received, leading zeros included (Slack's SDK builds its basestring so).
pub(crate) fn parse(text: &str, unit: TimestampUnit, canonical: bool) -> Option<i64> {
    if canonical && unit != TimestampUnit::Rfc3339 && text.len() > 1 && text.starts_with('0') {
        return None;
    }
    match unit {
        TimestampUnit::Seconds => parse_unix_seconds(text),
        TimestampUnit::Milliseconds => parse_unix_seconds(text).map(|ms| ms.div_euclid(1000)),
        TimestampUnit::Rfc3339 => parse_rfc3339(text),
    }
}

/// `seconds` (unix) written in `unit`: digits, digits followed by `000`, or
/// `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn format(seconds: i64, unit: TimestampUnit) -> String {
    match unit {
        TimestampUnit::Seconds => seconds.to_string(),
        TimestampUnit::Milliseconds => seconds.saturating_mul(1000).to_string(),
        TimestampUnit::Rfc3339 => {
            let days = seconds.div_euclid(86_400);
            let rest = seconds.rem_euclid(86_400);
            let (year, month, day) = civil_from_days(days);
            format!(
                "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
                rest / 3600,
                rest % 3600 / 60,
                rest % 60
            )
        }
    }
}

/// RFC 3339 section 5.6 `date-time`: `YYYY-MM-DD` `T` (or `t`, or a space) `HH:MM:SS`, an
/// optional fraction of up to 9 digits, then `Z` or `+HH:MM` / `-HH:MM`.
fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b.len() > 35 {
        return None;
    }
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 || len > 9 {
            return None;
        }
        rest = &fraction[len..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let r = rest.as_bytes();
            if r.len() != 6 || r[3] != b':' {
                return None;
            }
            let (h, m): (i64, i64) = (rest[1..3].parse().ok()?, rest[4..6].parse().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * (h * 3600 + m * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant, "chrono-Compatible
/// Low-Level Date Algorithms", `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`] (same source, `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_parse_as_twitch_sends_them_and_round_trip() {
        // Twitch docs' example message timestamp.
        assert_eq!(
            parse_rfc3339("2019-11-16T10:11:12.634234626Z"),
            Some(1_573_899_072)
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-12-03T13:00:00+01:00"),
            Some(1_796_299_200)
        );
        for seconds in [0, 951_782_400, 1_573_899_072, 1_796_306_400, 4_102_444_800] {
            let text = format(seconds, TimestampUnit::Rfc3339);
            assert_eq!(
                parse(&text, TimestampUnit::Rfc3339, true),
                Some(seconds),
                "{text}"
            );
        }
        for bad in [
            "",
            "2019-11-16",
            "2019-11-16T10:11:12",
            "2019-13-16T10:11:12Z",
            "2019-11-16T10:11:12.Z",
            "2019-11-16T10:11:12.1234567890Z",
            "2019-11-16T10:11:12+0100",
            "+019-11-16T10:11:12Z",
            "2019-11-16T10:11:12ZZ",
        ] {
            assert_eq!(parse(bad, TimestampUnit::Rfc3339, true), None, "{bad}");
        }
    }

    #[test]
    fn milliseconds_truncate_to_seconds() {
        assert_eq!(
            parse("1573899072999", TimestampUnit::Milliseconds, true),
            Some(1_573_899_072)
        );
        assert_eq!(
            format(1_573_899_072, TimestampUnit::Milliseconds),
            "1573899072000"
        );
        assert_eq!(parse("-5", TimestampUnit::Milliseconds, true), None);
        // Canonical digits only: a leading zero could shift a digit out of a variable part
        // that the template puts right before the timestamp.
        assert_eq!(parse("01700000000", TimestampUnit::Seconds, true), None);
        assert_eq!(parse("0", TimestampUnit::Seconds, true), Some(0));
        // Elsewhere the text is signed as received: the same second.
        assert_eq!(
            parse("01700000000", TimestampUnit::Seconds, false),
            Some(1_700_000_000)
        );
    }
}
