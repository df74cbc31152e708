#![no_main]
//! `cargo fuzz run verify_shopify`: see hookledger_fuzz_entry::verify_shopify (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::verify_shopify(data));
