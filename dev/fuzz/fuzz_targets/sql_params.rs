#![no_main]
//! `cargo fuzz run sql_params`: see hookledger_fuzz_entry::sql_params (dev/fuzz-entry/src/sql_params.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::sql_params(data));
