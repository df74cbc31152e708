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
