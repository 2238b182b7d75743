//! The artifact codec over programs the front end lowered (the codec is
//! [`archmax_program::artifact`]; these tests need workspaces to lower).

use crate::lower::{BuildInputs, lower};
use crate::{analyze_workspace, load_memory};
use archmax_program::artifact::*;
use archmax_program::program::*;

const SPEC: &str = "instructions: Check.\nstates:\n  check:\n    type: code\n    triggers: { manual: }\n    script: scripts/check.js\n    transitions: [{ to: done, description: when it checks out }]\n  done:\n    instructions: Done.\n";
const SCRIPT: &str = "export default async function ({ tools }) {\n  await tools.archmax_advance({ to: \"done\", reason: \"ok\" });\n}\n";
const HOST: &str = "[mounts.\"reference/\"]\nsource = \"data/reference\"\n";

fn program() -> Program {
    let files = vec![
        ("workflows/tiny/workflow.yaml", SPEC),
        ("workflows/tiny/scripts/check.js", SCRIPT),
        ("archmax.toml", HOST),
    ];
    let analysis = analyze_workspace(load_memory(files).expect("workspace"));
    let report = analysis.report(&[]).expect("report");
    assert!(report.is_valid(), "{:#?}", report.distinct());
    lower(&analysis, &[], &BuildInputs { platform_prompt: "Work in states." }).expect("lowers")
}

fn key(seed: u8) -> SecretKey {
    SecretKey::from_seed(&[seed; 32])
}

fn trusting(key: &SecretKey) -> TrustedKeys {
    TrustedKeys::new([key.public()])
}

/// The file's signature block replaced by another's (a signature lifted from elsewhere).
fn with_block_of(file: &[u8], donor: &[u8]) -> Vec<u8> {
    let ours = read_envelope(file).expect("envelope");
    let theirs = read_envelope(donor).expect("envelope");
    let mut out = [ours.header_bytes, ours.payload].concat();
    match theirs.signature {
        Some(block) => {
            out.push(ED25519);
            out.extend_from_slice(&block.key);
            out.extend_from_slice(&block.signature);
        }
        None => out.push(UNSIGNED),
    }
    out
}

#[test]
fn a_signed_artifact_loads_with_its_trusted_signer_and_its_bytecode() {
    let original = program();
    let signer = key(1);
    let loaded = load(&encode_signed(&original, &signer), &trusting(&signer)).expect("loads");
    assert_eq!(loaded.signer, Some(Signer { key: signer.public(), trusted: true }));
    assert!(loaded.bytecode_trusted());
    assert_eq!(loaded.program, original);
}

#[test]
fn signing_is_deterministic() {
    assert_eq!(encode_signed(&program(), &key(1)), encode_signed(&program(), &key(1)));
    assert_ne!(encode_signed(&program(), &key(1)), encode_signed(&program(), &key(2)));
}

#[test]
fn a_signed_artifact_without_trusted_keys_names_an_untrusted_signer() {
    let signer = key(1);
    let loaded = load(&encode_signed(&program(), &signer), &TrustedKeys::default()).expect("loads");
    assert_eq!(loaded.signer, Some(Signer { key: signer.public(), trusted: false }));
    assert!(!loaded.bytecode_trusted());
}

#[test]
fn a_signature_by_another_key_is_refused_when_keys_are_trusted() {
    let bytes = encode_signed(&program(), &key(2));
    let error = load(&bytes, &trusting(&key(1))).expect_err("refused");
    assert_eq!(error, ArtifactError::Untrusted(key(2).public().to_string()));
}

#[test]
fn an_unsigned_artifact_is_refused_when_keys_are_trusted() {
    assert_eq!(load(&encode(&program()), &trusting(&key(1))), Err(ArtifactError::Unsigned));
}

#[test]
fn every_flipped_bit_of_the_signature_block_is_refused() {
    let signer = key(1);
    let bytes = encode_signed(&program(), &signer);
    let block = bytes.len() - 97;
    for index in block..bytes.len() {
        for bit in [0x01u8, 0x10, 0x80] {
            let mut damaged = bytes.clone();
            damaged[index] ^= bit;
            for trusted in [TrustedKeys::default(), trusting(&signer)] {
                assert!(load(&damaged, &trusted).is_err(), "byte {index} bit {bit:#x} was accepted");
            }
        }
    }
}

#[test]
fn a_rehashed_edited_payload_under_the_original_signature_is_refused() {
    let signer = key(1);
    let signed = encode_signed(&program(), &signer);
    let mut edited = program();
    edited.strings.push("smuggled".to_string());
    let forged = with_block_of(&encode(&edited), &signed);
    for trusted in [TrustedKeys::default(), trusting(&signer)] {
        let error = load(&forged, &trusted).expect_err("refused");
        assert_eq!(error, ArtifactError::BadSignature(signer.public().to_string()));
    }
}

#[test]
fn a_signature_block_appended_to_is_refused() {
    let mut bytes = encode_signed(&program(), &key(1));
    bytes.push(0);
    assert_eq!(load(&bytes, &TrustedKeys::default()), Err(ArtifactError::Trailing(1)));
    let mut unknown = encode(&program());
    *unknown.last_mut().expect("block") = 7;
    assert_eq!(decode(&unknown), Err(ArtifactError::UnknownSignature(7)));
}

/// The `reference/` mount's source rewritten to `hostile` and re-hashed, as an
/// attacker would: the load must refuse it in the mounts table; the refusal's text.
fn refusal_of_mount_source(hostile: &str) -> String {
    let mut tampered = program();
    let mount = tampered.mounts.iter().find(|mount| tampered.str(mount.key) == "reference/").expect("mount");
    let source = mount.source.0 as usize;
    tampered.strings[source] = hostile.to_string();
    let error = decode(&encode(&tampered)).expect_err(hostile);
    let message = error.to_string();
    assert!(matches!(error, ArtifactError::Table { table: "mounts", .. }), "{hostile:?}: {message}");
    message
}

#[test]
fn a_rehashed_mount_source_outside_the_workspace_is_refused_naming_the_entry() {
    for hostile in ["/", "../..", "data/../../etc", "/etc/passwd", "data\\..\\..", "data\0x", "", "./data"] {
        let message = refusal_of_mount_source(hostile);
        assert!(message.contains("mounts table") && message.contains("`reference/`"), "{message}");
    }
}

#[test]
fn a_rehashed_mount_source_in_a_runtime_area_is_refused_naming_the_entry() {
    for hostile in [
        "sessions",
        "sessions/s1/checkpoints",
        "workflows",
        "workflows/tiny",
        "target/archmax",
        "archmax.toml",
        "scratchpad",
    ] {
        let message = refusal_of_mount_source(hostile);
        assert!(message.contains("`reference/`") && message.contains(hostile), "{message}");
    }
}

#[test]
fn rehashed_malformed_names_are_refused_naming_their_table() {
    let cases: [(&str, &str, &str); 4] = [
        ("tiny", "Tiny/../x", "workflows"),
        ("check", "check state", "states"),
        ("scripts/check.js", "../../check.js", "scripts"),
        ("reference", "checkpoints", "mounts"),
    ];
    for (from, to, table) in cases {
        let mut tampered = program();
        let index = tampered.strings.iter().position(|text| text == from).expect(from);
        tampered.strings[index] = to.to_string();
        let error = decode(&encode(&tampered)).expect_err(to);
        assert!(matches!(error, ArtifactError::Table { table: found, .. } if found == table), "{to}: {error}");
    }
}

#[test]
fn bytecode_of_an_untrusted_artifact_is_recompiled_from_its_source() {
    let original = program();
    let mut tampered = original.clone();
    tampered.workflows[0].scripts[0].bytecode = vec![0x13, 0x37, 0xff, 0x00, 0x42];
    let loaded = load(&encode(&tampered), &TrustedKeys::default()).expect("loads");
    assert!(!loaded.bytecode_trusted());
    assert_eq!(loaded.program.workflows[0].scripts[0].bytecode, original.workflows[0].scripts[0].bytecode);
    // Signed by a key nobody trusts: still recompiled.
    let loaded = load(&encode_signed(&tampered, &key(3)), &TrustedKeys::default()).expect("loads");
    assert_eq!(loaded.program.workflows[0].scripts[0].bytecode, original.workflows[0].scripts[0].bytecode);
}

#[test]
fn an_untrusted_script_whose_source_does_not_compile_is_refused() {
    let mut tampered = program();
    let source = tampered.workflows[0].scripts[0].source.0 as usize;
    tampered.strings[source] = "export default function (".to_string();
    let error = decode(&encode(&tampered)).expect_err("refused");
    assert!(matches!(error, ArtifactError::Script { .. }), "{error}");
    assert!(error.to_string().contains("scripts/check.js"), "{error}");
}
