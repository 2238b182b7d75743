//! Fuzzes artifact loading with signature verification on: the fixed test key in
//! `fuzz.key` is the one trusted key. Each input is tried twice: as a whole file (which
//! must pass the signature check before anything is decoded), and as a payload wrapped in
//! a header and signed with the trusted key, which reaches the bincode decoder, the index
//! and table checks, and the recompilation of scripts behind a valid signature. Neither
//! may panic, and nothing unsigned or signed by another key may load.
//!
//! Seed the corpus from a signed build of the example workspace:
//! `archmax build --root specs --sign crates/compiler/fuzz/fuzz.key -o crates/compiler/fuzz/corpus/signed/specs.amx`.
#![no_main]

use archmax_compiler::artifact::{self, ArtifactError, SecretKey, TrustedKeys};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fn key() -> SecretKey {
    SecretKey::parse_file(include_str!("../fuzz.key")).expect("the committed fuzz key parses")
}

/// `data` as the payload of a header this archmax accepts, signed with `key`.
fn signed_file(data: &[u8], key: &SecretKey) -> Vec<u8> {
    let mut header = Vec::with_capacity(96);
    header.extend_from_slice(artifact::MAGIC);
    header.extend_from_slice(&artifact::FORMAT_VERSION.to_le_bytes());
    for text in [archmax_compiler::VERSION.as_bytes(), b"3".as_slice()] {
        header.extend_from_slice(&(text.len() as u16).to_le_bytes());
        header.extend_from_slice(text);
    }
    header.extend_from_slice(&(data.len() as u64).to_le_bytes());
    header.extend_from_slice(&Sha256::digest(data));
    let signature = key.sign(&[artifact::SIGNATURE_CONTEXT, &header].concat());
    let mut file = header;
    file.extend_from_slice(data);
    file.push(1);
    file.extend_from_slice(&key.public().to_bytes());
    file.extend_from_slice(&signature);
    file
}

fuzz_target!(|data: &[u8]| {
    let key = key();
    let trusted = TrustedKeys::new([key.public()]);
    if let Ok(loaded) = artifact::load(data, &trusted) {
        assert_eq!(loaded.signer.map(|signer| signer.key), Some(key.public()), "only the trusted key's files load");
    }
    let wrapped = signed_file(data, &key);
    match artifact::load(&wrapped, &trusted) {
        Ok(loaded) => assert!(loaded.bytecode_trusted()),
        Err(error) => assert!(
            !matches!(error, ArtifactError::BadSignature(_) | ArtifactError::Unsigned | ArtifactError::Untrusted(_)),
            "a correctly signed file was refused for its signature: {error}"
        ),
    }
});
