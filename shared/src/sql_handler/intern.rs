//! The configured statements as `&'static Sql` (what [`crate::ledger::Tx`] and the
//! one-statement composition take): each distinct `(text, parameter types)` is leaked once per
//! process and found again by value, so re-reading the same sources (`crate::sources_refresh`)
//! leaks nothing more. Only a statement whose text or types changed costs a new one; a process
//! keeps at most what its configurations ever held.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tokio_postgres::types::Type;

use crate::db::Sql;

/// Every statement interned so far, by text and parameter types.
type Interned = Mutex<HashMap<(String, Vec<Type>), &'static Sql>>;

/// The one `&'static Sql` for `text` with `types`.
pub fn intern(text: &str, types: &[Type]) -> &'static Sql {
    static INTERNED: OnceLock<Interned> = OnceLock::new();
    let map = INTERNED.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let key = (text.to_owned(), types.to_vec());
    if let Some(found) = map.get(&key) {
        return found;
    }
    let sql: &'static Sql = Box::leak(Box::new(Sql {
        text: Box::leak(text.to_owned().into_boxed_str()),
        types: Box::leak(types.to_vec().into_boxed_slice()),
    }));
    map.insert(key, sql);
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_and_types_are_one_statement() {
        let a = intern("INSERT INTO t (a) VALUES ($1)", &[Type::TEXT]);
        let b = intern("INSERT INTO t (a) VALUES ($1)", &[Type::TEXT]);
        assert!(std::ptr::eq(a, b));
        let c = intern("INSERT INTO t (a) VALUES ($1)", &[Type::INT8]);
        assert!(!std::ptr::eq(a, c));
        assert_eq!(c.types, &[Type::INT8]);
    }
}
