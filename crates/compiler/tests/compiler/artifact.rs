//! The artifact envelope: round trip, determinism, and refusal of every damaged file.

use archmax_compiler::artifact::{self, ArtifactError};
use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, load_memory};

const SMALL: &str = "title: Tiny\ninstructions: Answer.\nstates:\n  answer:\n    triggers: { manual: { requires: [{ name: q, type: string }] } }\n    instructions: Answer the question.\n";

fn program(spec: &str, extra: &[(&str, &str)]) -> Program {
    let mut files: Vec<(&str, &str)> = vec![("workflows/tiny/workflow.yaml", spec)];
    files.extend_from_slice(extra);
    let analysis = analyze_workspace(load_memory(files).expect("workspace"));
    let report = analysis.report(&[]).expect("report");
    assert!(report.is_valid(), "{:#?}", report.distinct());
    lower(&analysis, &[], &BuildInputs { platform_prompt: "Work in states." }).expect("lowers")
}

#[test]
fn decoding_an_encoded_program_gives_it_back() {
    let original = program(SMALL, &[]);
    let bytes = artifact::encode(&original);
    assert_eq!(artifact::decode(&bytes).expect("decodes"), original);
}

#[test]
fn encoding_is_deterministic() {
    let first = artifact::encode(&program(SMALL, &[]));
    let second = artifact::encode(&program(SMALL, &[]));
    assert_eq!(first, second);
}

#[test]
fn every_flipped_byte_is_refused() {
    let bytes = artifact::encode(&program(SMALL, &[]));
    for index in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut damaged = bytes.clone();
            damaged[index] ^= bit;
            assert!(artifact::decode(&damaged).is_err(), "flipping byte {index} (bit {bit:#x}) was accepted");
        }
    }
}

#[test]
fn every_truncation_is_refused() {
    let bytes = artifact::encode(&program(SMALL, &[]));
    for length in 0..bytes.len() {
        let error = artifact::decode(&bytes[..length]).expect_err("a truncated file is refused");
        assert!(
            matches!(error, ArtifactError::Truncated(_) | ArtifactError::Length { .. } | ArtifactError::Foreign),
            "truncated at {length}: {error}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(artifact::decode(&longer), Err(ArtifactError::Trailing(1))));
}

#[test]
fn foreign_and_future_files_are_named_as_such() {
    assert_eq!(artifact::decode(b"PK\x03\x04 a zip file"), Err(ArtifactError::Foreign));
    assert_eq!(artifact::decode(b""), Err(ArtifactError::Foreign));
    let mut future = artifact::encode(&program(SMALL, &[]));
    future[8..12].copy_from_slice(&(artifact::FORMAT_VERSION + 1).to_le_bytes());
    assert!(matches!(artifact::decode(&future), Err(ArtifactError::FutureFormat { .. })));
    let message = artifact::decode(&future).expect_err("future").to_string();
    assert!(message.contains("upgrade archmax"), "{message}");
}

/// A tampered payload with a recomputed checksum gets past the envelope; the decoder and
/// the index check must still refuse or accept it without panicking.
#[test]
fn rehashed_tampering_never_panics() {
    use sha2::Digest;
    let bytes = artifact::encode(&program(SMALL, &[]));
    let envelope = artifact::read_envelope(&bytes).expect("envelope");
    let (header, payload) = (envelope.header.clone(), envelope.payload);
    let header_length = envelope.header_bytes.len();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut tampered = payload.to_vec();
        let at = (state as usize) % tampered.len();
        tampered[at] = (state >> 32) as u8;
        let mut file = bytes[..header_length - 32].to_vec();
        file.extend_from_slice(&sha2::Sha256::digest(&tampered));
        file.extend_from_slice(&tampered);
        file.push(0);
        let _ = artifact::decode(&file);
    }
    assert_eq!(header.format, artifact::FORMAT_VERSION);
}

#[test]
fn code_state_scripts_carry_bytecode() {
    let spec = "instructions: Check.\nstates:\n  check:\n    type: code\n    triggers: { manual: }\n    script: scripts/check.js\n";
    let script = "import type { X } from \"@archmax-ai/harness/code-state\";\nexport default async function ({ tools }) {\n  await tools.archmax_raise({ code: \"x\", reason: \"y\" });\n}\n";
    let program = program(spec, &[("workflows/tiny/scripts/check.js", script)]);
    let compiled = &program.workflows[0].scripts[0];
    assert!(!compiled.bytecode.is_empty());
    let source = program.str(compiled.source);
    assert_eq!(source.lines().count(), script.lines().count(), "stripping keeps the line count");
    assert!(!source.contains("@archmax-ai"), "the typed import is blanked");
}

/// Replays `crates/compiler/fuzz/regressions/artifact/` as the `signed` and `artifact` fuzz
/// targets see them: with the fuzzing key trusted, and with no trusted key. Nothing may
/// panic, and a file that loads under trust was signed by the trusted key.
#[test]
fn artifact_fuzzing_regressions_replay_without_panicking() {
    use artifact::{SecretKey, TrustedKeys};
    let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let key = SecretKey::parse_file(&std::fs::read_to_string(fuzz.join("fuzz.key")).expect("fuzz.key"))
        .expect("the fuzzing key parses");
    let trusted = TrustedKeys::new([key.public()]);
    let mut paths: Vec<_> = std::fs::read_dir(fuzz.join("regressions/artifact"))
        .expect("regressions/artifact/ exists")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "regressions/artifact/ holds the replayed inputs");
    for path in paths {
        let bytes = std::fs::read(&path).expect("readable");
        match artifact::load(&bytes, &trusted) {
            Ok(loaded) => assert_eq!(loaded.signer.map(|signer| signer.key), Some(key.public()), "{}", path.display()),
            // The seed is signed by the trusted key: whatever else may refuse it (a newer
            // compiler), its signature is not the reason.
            Err(error) if path.ends_with("signed-code-state.amx") => assert!(
                !matches!(
                    error,
                    ArtifactError::BadSignature(_) | ArtifactError::Untrusted(_) | ArtifactError::Unsigned
                ),
                "{error}"
            ),
            Err(_) => {}
        }
        let _ = artifact::load(&bytes, &TrustedKeys::default());
    }
}

/// The loader's table checks accept everything the compiler writes: every valid
/// workspace in the repository (the example and each golden run's) builds, and its
/// artifact loads.
#[test]
fn every_valid_workspace_in_the_repository_loads_after_building() {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut roots = vec![repository.join("specs")];
    let mut runs: Vec<_> = std::fs::read_dir(repository.join("golden/runs"))
        .expect("golden/runs")
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("workspace"))
        .filter(|path| path.join("workflows").is_dir())
        .collect();
    runs.sort();
    roots.extend(runs);
    let mut built = 0;
    for root in roots {
        let Ok(analysis) = archmax_compiler::analyze(&root) else { continue };
        if !analysis.report(&[]).is_ok_and(|report| report.is_valid()) {
            continue;
        }
        let program = lower(&analysis, &[], &BuildInputs { platform_prompt: "Work in states." }).expect("lowers");
        // Scripts are recompiled on load and give the same bytecode.
        let loaded = artifact::decode(&artifact::encode(&program));
        assert!(loaded.as_ref() == Ok(&program), "{}: {:?}", root.display(), loaded.err());
        built += 1;
    }
    assert!(built > 10, "only {built} workspaces were built");
}
