#![no_main]
//! `cargo fuzz run settings_env`: see hookledger_fuzz_entry::settings_env (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::settings_env(data));
