//! The receiver function as a library, so the end-to-end tests drive the exact handler the
//! binary runs.

pub mod handler;
