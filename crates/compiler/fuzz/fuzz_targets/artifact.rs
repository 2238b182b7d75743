//! Fuzzes artifact loading twice over, with no trusted keys: the raw bytes as a file, and
//! the bytes as an unsigned payload wrapped in a valid header with a correct checksum,
//! which reaches the bincode decoder, the index and table checks and the recompilation of
//! scripts behind the envelope. Neither may panic. (`signed` fuzzes with a trusted key.)
#![no_main]

use archmax_compiler::artifact;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fuzz_target!(|data: &[u8]| {
    let _ = artifact::decode(data);
    let mut file = Vec::with_capacity(data.len() + 96);
    file.extend_from_slice(artifact::MAGIC);
    file.extend_from_slice(&artifact::FORMAT_VERSION.to_le_bytes());
    for text in [archmax_compiler::VERSION.as_bytes(), b"3".as_slice()] {
        file.extend_from_slice(&(text.len() as u16).to_le_bytes());
        file.extend_from_slice(text);
    }
    file.extend_from_slice(&(data.len() as u64).to_le_bytes());
    file.extend_from_slice(&Sha256::digest(data));
    file.extend_from_slice(data);
    file.push(0);
    let _ = artifact::decode(&file);
});
