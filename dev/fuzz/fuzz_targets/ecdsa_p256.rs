#![no_main]
//! `cargo fuzz run ecdsa_p256`: see hookledger_fuzz_entry::ecdsa_p256 (dev/fuzz-entry/src/model.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::ecdsa_p256(data));
