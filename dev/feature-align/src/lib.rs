//! Dev-only and empty: see `Cargo.toml` for why this crate exists.
