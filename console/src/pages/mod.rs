//! One module per page; each renders from `shared`'s reads and [`crate::queries`].

use axum::extract::State;
use maud::Markup;

use crate::{AppState, PageError};

pub mod dead;
pub mod event;
pub mod events;
pub mod forget;
pub mod overview;
pub mod redrive;
pub mod rejected;
pub mod stuck;

/// A connection from the pool, or the 503 page.
///
/// # Errors
/// [`PageError::Unavailable`] when no connection can be had.
pub async fn connection(state: &AppState) -> Result<shared::db::Connection, PageError> {
    Ok(state.pool.get().await?)
}

/// Any other path: 404 (behind the token like every route).
pub async fn not_found(State(_): State<AppState>) -> Result<Markup, PageError> {
    Err(PageError::NotFound("No such page.".to_owned()))
}

/// `value` of the field `field` if PostgreSQL's text can hold it: no NUL character (else the
/// query would fail, a 503 for bad input).
///
/// # Errors
/// [`PageError::BadInput`] naming `field` when `value` holds a NUL.
pub fn text(field: &'static str, value: Option<String>) -> Result<Option<String>, PageError> {
    match value {
        Some(value) if value.contains('\0') => {
            Err(PageError::bad(field, "contains a NUL character"))
        }
        value => Ok(value),
    }
}

/// A filter value: trimmed, `None` when empty.
pub fn given(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}
