#![no_main]
//! `cargo fuzz run extract`: see hookledger_fuzz_entry::extract (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::extract(data));
