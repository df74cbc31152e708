#![no_main]
//! `cargo fuzz run scheme_model`: see hookledger_fuzz_entry::scheme_model (dev/fuzz-entry/src/model.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::scheme_model(data));
