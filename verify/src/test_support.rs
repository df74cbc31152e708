//! Helpers shared by the scheme files' tests.

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

thread_local! {
    /// How many MACs [`super::SigningKey::tag`] computed on this thread.
    pub(crate) static MACS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The MACs computed on this thread while `f` runs.
pub(crate) fn macs_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = MACS.with(std::cell::Cell::get);
    let value = f();
    (value, MACS.with(std::cell::Cell::get) - before)
}

/// A header map from `(name, value)` pairs; names in any case; repeated names are appended.
pub(crate) fn header_map(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// A header map from the pairs [`crate::sign`] returns.
pub(crate) fn signed_map<N: AsRef<str>>(pairs: &[(N, String)]) -> HeaderMap {
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_ref(), v.as_str()))
        .collect();
    header_map(&pairs)
}

/// A header map from the pairs [`crate::Verifier::sign`] returns.
pub(crate) fn owned_map(pairs: &[(String, String)]) -> HeaderMap {
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    header_map(&pairs)
}

/// A built-in preset's test helpers, as every source of `$scheme` runs it through the crate's
/// dispatch: `verify(keys, headers, body, now, tolerance_secs)`, and `sign_as(key, msg_id,
/// timestamp, body)` returning the signature headers with `&'static str` names (for comparing
/// with literals).
macro_rules! preset_test_fns {
    ($scheme:expr) => {
        fn verify(
            keys: &[crate::SigningKey],
            headers: &http::HeaderMap,
            body: &[u8],
            now: i64,
            tolerance_secs: u64,
        ) -> Result<crate::Verified, crate::VerifyError> {
            crate::verify($scheme, keys, headers, body, now, tolerance_secs)
        }

        fn sign_as(
            key: &crate::SigningKey,
            msg_id: &str,
            timestamp: i64,
            body: &[u8],
        ) -> Vec<(&'static str, String)> {
            crate::sign($scheme, key, msg_id, timestamp, body)
                .into_iter()
                .map(|(name, value)| (&*Box::leak(name.into_boxed_str()), value))
                .collect()
        }
    };
}
pub(crate) use preset_test_fns;
