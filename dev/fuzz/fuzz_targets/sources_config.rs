#![no_main]
//! `cargo fuzz run sources_config`: see hookledger_fuzz_entry::sources_config (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::sources_config(data));
