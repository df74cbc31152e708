//! Times in the filters: RFC 3339 (`2026-12-01T09:30:00Z`) or what an HTML `datetime-local`
//! input sends (`2026-12-01T09:30`, seconds optional), read as UTC.

use std::time::SystemTime;

use time::format_description::FormatItem;
use time::macros::format_description;
use time::PrimitiveDateTime;

use crate::PageError;

const LOCAL_MINUTES: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]");
const LOCAL_SECONDS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");

/// Parses `value` of the filter `field`; `None` when empty.
///
/// # Errors
/// [`PageError::BadInput`] naming `field`.
pub fn parse(field: &'static str, value: Option<&str>) -> Result<Option<SystemTime>, PageError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if let Ok(at) = shared::timestamp::parse_rfc3339(value) {
        return Ok(Some(at));
    }
    [LOCAL_MINUTES, LOCAL_SECONDS]
        .iter()
        .find_map(|format| PrimitiveDateTime::parse(value, format).ok())
        .map(|at| Some(SystemTime::from(at.assume_utc())))
        .ok_or_else(|| {
            PageError::bad(
                field,
                format!("{value:?} is not a time such as 2026-12-01T09:30:00Z or 2026-12-01T09:30 (UTC)"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_and_datetime_local_are_read_as_utc() {
        let utc = parse("from", Some("2026-12-01T09:30:00Z")).unwrap();
        assert_eq!(parse("from", Some("2026-12-01T09:30")).unwrap(), utc);
        assert_eq!(parse("from", Some("2026-12-01T09:30:00")).unwrap(), utc);
        assert_eq!(parse("from", Some("")).unwrap(), None);
        assert!(matches!(
            parse("until", Some("yesterday")),
            Err(PageError::BadInput { field: "until", .. })
        ));
    }
}
