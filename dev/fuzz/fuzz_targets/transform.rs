#![no_main]
//! `cargo fuzz run transform`: see hookledger_fuzz_entry::transform (dev/fuzz-entry/src/expression.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::transform(data));
