#![no_main]
//! `cargo fuzz run verify_github`: see hookledger_fuzz_entry::verify_github (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::verify_github(data));
