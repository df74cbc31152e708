#![no_main]
//! `cargo fuzz run ed25519`: see hookledger_fuzz_entry::ed25519 (dev/fuzz-entry/src/model.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::ed25519(data));
