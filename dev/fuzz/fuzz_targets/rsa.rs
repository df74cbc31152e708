#![no_main]
//! `cargo fuzz run rsa`: see hookledger_fuzz_entry::rsa (dev/fuzz-entry/src/model.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::rsa(data));
