//! Splitting a batch delivery into its event objects, as exact bytes: used by extraction (one
//! event per item) and, for a batch signed item by item (Adyen), by verification.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::config::{Batch, MAX_BATCH_ITEMS};

/// Why a batch cannot be split: the body is no JSON (`NotUtf8`, `NotJson` with serde's error,
/// which the caller summarises without values), or its items are not where and what the rule
/// says (`Items`, a fixed reason).
#[derive(Debug)]
pub(crate) enum SplitError {
    /// The body is not UTF-8.
    NotUtf8,
    /// The body is not well-formed JSON.
    NotJson(serde_json::Error),
    /// The items: absent, not an array, empty, too many, or an item without its event object.
    Items(&'static str),
}

/// The raw JSON at `pointer` (RFC 6901, object members only) inside `raw`; `""` is `raw`.
pub(crate) fn raw_at<'a>(raw: &'a RawValue, pointer: &str) -> Option<&'a RawValue> {
    let mut at = raw;
    if pointer.is_empty() {
        return Some(at);
    }
    for token in pointer.strip_prefix('/')?.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        let members: std::collections::HashMap<Cow<'a, str>, &'a RawValue> =
            serde_json::from_str(at.get()).ok()?;
        at = members.get(token.as_str()).copied()?;
    }
    Some(at)
}

/// The event objects of a batch delivery, in order, as the exact bytes received: every item of
/// the array at `batch.items_pointer`, or the object at `batch.event_pointer` inside each. At
/// least one, at most [`MAX_BATCH_ITEMS`]. Whether each is a JSON object is the caller's check.
///
/// # Errors
/// [`SplitError`] as above.
pub(crate) fn events<'a>(body: &'a [u8], batch: &Batch) -> Result<Vec<&'a RawValue>, SplitError> {
    let text = std::str::from_utf8(body).map_err(|_| SplitError::NotUtf8)?;
    let root: &'a RawValue = serde_json::from_str(text).map_err(SplitError::NotJson)?;
    let array = raw_at(root, &batch.items_pointer)
        .ok_or(SplitError::Items("batch: no items where expected"))?;
    let items: Vec<&'a RawValue> = serde_json::from_str(array.get())
        .map_err(|_| SplitError::Items("batch: items are not an array"))?;
    if items.is_empty() {
        return Err(SplitError::Items("batch: no items"));
    }
    if items.len() > MAX_BATCH_ITEMS {
        return Err(SplitError::Items("batch: too many items"));
    }
    items
        .into_iter()
        .map(|item| match &batch.event_pointer {
            Some(pointer) => {
                raw_at(item, pointer).ok_or(SplitError::Items("batch: an item has no event object"))
            }
            None => Ok(item),
        })
        .collect()
}
