#![no_main]
//! `cargo fuzz run filter`: see hookledger_fuzz_entry::filter (dev/fuzz-entry/src/expression.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::filter(data));
