//! The artifact file (`.amx`): a verified, optionally signed envelope around a
//! [`Program`] encoded by [`crate::codec`].
//!
//! ```text
//! offset  size  field
//! 0       8     magic "ARCHMAX\0"
//! 8       4     format version (u32, little-endian): 2
//! 12      2+n   compiler version (u16 length, UTF-8)
//! ..      2+n   runtime contract (u16 length, UTF-8)
//! ..      8     payload length (u64)
//! ..      32    SHA-256 of the payload
//! ..      n     payload: bincode 2, standard configuration
//! ..      1     signature kind: 0 unsigned, 1 Ed25519
//! ..      32    the signer's public key            (kind 1 only)
//! ..      64    the Ed25519 signature              (kind 1 only)
//! ```
//!
//! The signature covers [`SIGNATURE_CONTEXT`] followed by every header byte from the magic
//! through the payload's SHA-256, so it binds the versions, the length and (through the
//! digest) the payload. Ed25519 is deterministic: the same key gives the same file.
//!
//! [`load`] checks, in this order and before it decodes anything: the magic and format,
//! the framing of the signature block, the signature itself (a signed file whose signature
//! does not verify is always refused), the trust policy (when trusted keys are configured,
//! an unsigned file or one signed by another key is refused), the compiler and contract,
//! and the payload's length and hash. It then decodes under a size bound, checks every
//! index ([`tables::verify`]) and every table the VM relies on ([`tables::check`]). The
//! one thing to know: QuickJS bytecode is trusted only from a file signed by a trusted key;
//! from any other file every script is recompiled from the source the artifact carries,
//! so the VM never loads bytecode nobody vouched for. Every refusal is one sentence.

mod signing;
mod tables;

use sha2::{Digest, Sha256};

pub use signing::{KeyError, PUBLIC_PREFIX, PublicKey, SECRET_PREFIX, SecretKey, TrustedKeys};
pub use tables::{check as check_tables, verify};

use crate::codec;
use crate::program::Program;

pub const MAGIC: &[u8; 8] = b"ARCHMAX\0";
/// Bumped whenever the layout of the file or of [`Program`] changes.
pub const FORMAT_VERSION: u32 = 3;
/// The largest payload the decoder accepts.
pub const MAX_PAYLOAD: usize = crate::codec::MAX_DECODE_BYTES;
/// The file extension of artifacts.
pub const EXTENSION: &str = "amx";
/// What a signature signs before the header bytes, so it means nothing anywhere else.
pub const SIGNATURE_CONTEXT: &[u8] = b"archmax artifact signature v2\0";
/// The signature-kind byte of an unsigned artifact.
pub const UNSIGNED: u8 = 0;
/// The signature-kind byte of an Ed25519-signed artifact.
pub const ED25519: u8 = 1;

/// Why an artifact was refused. The text says what is wrong; what to do about it (which
/// command rebuilds or signs an artifact) is the host's to add: the CLI does, by variant.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArtifactError {
    #[error("not an archmax artifact (the file does not start with the artifact magic)")]
    Foreign,
    #[error("the artifact is truncated: {0}")]
    Truncated(&'static str),
    #[error("the artifact uses format {found}, newer than the format {supported} this archmax reads; upgrade archmax")]
    FutureFormat { found: u32, supported: u32 },
    #[error("the artifact uses the retired format {found}")]
    OldFormat { found: u32 },
    #[error("the artifact was built by archmax {found}, but this is archmax {current}")]
    CompilerMismatch { found: String, current: String },
    #[error("the artifact targets runtime contract \"{found}\"; this runtime runs contract \"{supported}\"")]
    Contract { found: String, supported: String },
    #[error(
        "the artifact's payload is {found} bytes but its header says {declared}: the file is truncated or has trailing bytes"
    )]
    Length { declared: u64, found: u64 },
    #[error("the artifact has {0} byte(s) after its signature block: something was appended to the file")]
    Trailing(u64),
    #[error("the artifact's signature block has the unknown kind {0}; this archmax reads 0 (unsigned) and 1 (Ed25519)")]
    UnknownSignature(u8),
    #[error("the artifact's signer key is not a usable Ed25519 public key: the file was tampered with")]
    BadSignerKey,
    #[error("the artifact's signature by {0} does not verify: the file was modified after it was signed")]
    BadSignature(String),
    #[error("the artifact is not signed, and trusted keys are configured")]
    Unsigned,
    #[error("the artifact is signed by {0}, which is not a trusted key")]
    Untrusted(String),
    #[error("the artifact's payload does not match its checksum: the file is corrupted or was modified")]
    Checksum,
    #[error("the artifact's payload cannot be decoded: {0}")]
    Payload(String),
    #[error("the artifact is inconsistent: {0}")]
    Inconsistent(String),
    #[error("the artifact's {table} table is invalid at {entry}: {problem}")]
    Table { table: &'static str, entry: String, problem: String },
    #[error("the script `{path}` of workflow `{workflow}` in the artifact does not compile from its source: {message}")]
    Script { workflow: String, path: String, message: String },
}

/// The artifact header, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub format: u32,
    pub compiler: String,
    pub contract: String,
    pub payload_length: u64,
    pub checksum: [u8; 32],
}

/// The signature block of a signed file, as read (not yet verified).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignatureBlock {
    pub key: [u8; 32],
    pub signature: [u8; 64],
}

/// A file split into its parts: framing checked, nothing verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope<'b> {
    pub header: Header,
    /// The header's bytes, magic through checksum: what a signature covers.
    pub header_bytes: &'b [u8],
    pub payload: &'b [u8],
    pub signature: Option<SignatureBlock>,
}

/// Who signed a loaded artifact, and whether the loader trusts that key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signer {
    pub key: PublicKey,
    pub trusted: bool,
}

/// A verified artifact.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    pub header: Header,
    pub program: Program,
    /// `None` for an unsigned file.
    pub signer: Option<Signer>,
}

impl Loaded {
    /// True when the file's bytecode was used as built (signed by a trusted key); false
    /// when every script was recompiled from its source.
    pub fn bytecode_trusted(&self) -> bool {
        self.signer.is_some_and(|signer| signer.trusted)
    }
}

/// Encodes a program into unsigned artifact bytes.
pub fn encode(program: &Program) -> Vec<u8> {
    let (mut out, _) = header_and_payload(program);
    out.push(UNSIGNED);
    out
}

/// Encodes a program into artifact bytes signed with `key`.
pub fn encode_signed(program: &Program, key: &SecretKey) -> Vec<u8> {
    let (mut out, header_length) = header_and_payload(program);
    let signature = key.sign(&signed_message(&out[..header_length]));
    out.push(ED25519);
    out.extend_from_slice(&key.public().to_bytes());
    out.extend_from_slice(&signature);
    out
}

/// The header and payload bytes, and the header's length.
fn header_and_payload(program: &Program) -> (Vec<u8>, usize) {
    // A `Program` is plain owned data, which bincode always encodes; should that ever
    // change, the empty payload left here is refused by `load`, never mistaken for a program.
    let payload = codec::encode(program).unwrap_or_default();
    let checksum: [u8; 32] = Sha256::digest(&payload).into();
    let mut out = Vec::with_capacity(payload.len() + 200);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    for text in [&program.compiler, &program.contract] {
        let bytes = text.as_bytes();
        out.extend_from_slice(&(bytes.len().min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend_from_slice(&bytes[..bytes.len().min(u16::MAX as usize)]);
    }
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum);
    let header_length = out.len();
    out.extend_from_slice(&payload);
    (out, header_length)
}

fn signed_message(header_bytes: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_CONTEXT.len() + header_bytes.len());
    message.extend_from_slice(SIGNATURE_CONTEXT);
    message.extend_from_slice(header_bytes);
    message
}

struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, count: usize, what: &'static str) -> Result<&'b [u8], ArtifactError> {
        let end = self.at.checked_add(count).ok_or(ArtifactError::Truncated(what))?;
        let slice = self.bytes.get(self.at..end).ok_or(ArtifactError::Truncated(what))?;
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ArtifactError> {
        self.take(N, what)?.try_into().map_err(|_| ArtifactError::Truncated(what))
    }

    fn text(&mut self, what: &'static str) -> Result<String, ArtifactError> {
        let length = u16::from_le_bytes(self.array(what)?);
        let bytes = self.take(length as usize, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| ArtifactError::Inconsistent("a version text in the header is not UTF-8".to_string()))
    }
}

const IN_HEADER: &str = "the file ends inside the header";

/// Reads the header; returns it with its length in bytes.
fn read_header(bytes: &[u8]) -> Result<(Header, usize), ArtifactError> {
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) && !bytes.is_empty() {
            Err(ArtifactError::Truncated("the file ends inside the magic"))
        } else {
            Err(ArtifactError::Foreign)
        };
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(ArtifactError::Foreign);
    }
    let mut cursor = Cursor { bytes, at: MAGIC.len() };
    let format = u32::from_le_bytes(cursor.array(IN_HEADER)?);
    if format > FORMAT_VERSION {
        return Err(ArtifactError::FutureFormat { found: format, supported: FORMAT_VERSION });
    }
    if format < FORMAT_VERSION {
        return Err(ArtifactError::OldFormat { found: format });
    }
    let compiler = cursor.text(IN_HEADER)?;
    let contract = cursor.text(IN_HEADER)?;
    let payload_length = u64::from_le_bytes(cursor.array(IN_HEADER)?);
    let checksum = cursor.array::<32>(IN_HEADER)?;
    Ok((Header { format, compiler, contract, payload_length, checksum }, cursor.at))
}

/// Splits a file into header, payload and signature block, checking only the framing.
pub fn read_envelope(bytes: &[u8]) -> Result<Envelope<'_>, ArtifactError> {
    let (header, header_length) = read_header(bytes)?;
    let (header_bytes, rest) = bytes.split_at(header_length);
    let payload = usize::try_from(header.payload_length)
        .ok()
        .and_then(|length| rest.get(..length))
        .ok_or(ArtifactError::Length { declared: header.payload_length, found: rest.len() as u64 })?;
    let mut cursor = Cursor { bytes, at: header_length + payload.len() };
    const IN_BLOCK: &str = "the file ends inside its signature block";
    let signature = match cursor.array::<1>(IN_BLOCK)?[0] {
        UNSIGNED => None,
        ED25519 => Some(SignatureBlock { key: cursor.array(IN_BLOCK)?, signature: cursor.array(IN_BLOCK)? }),
        other => return Err(ArtifactError::UnknownSignature(other)),
    };
    if cursor.at != bytes.len() {
        return Err(ArtifactError::Trailing((bytes.len() - cursor.at) as u64));
    }
    Ok(Envelope { header, header_bytes, payload, signature })
}

/// Verifies a file's signature (if any) and applies the trust policy.
fn check_signature(envelope: &Envelope<'_>, trusted: &TrustedKeys) -> Result<Option<Signer>, ArtifactError> {
    let Some(block) = envelope.signature else {
        return if trusted.is_empty() { Ok(None) } else { Err(ArtifactError::Unsigned) };
    };
    let key = PublicKey::from_bytes(&block.key).ok_or(ArtifactError::BadSignerKey)?;
    if !key.verifies(&signed_message(envelope.header_bytes), &block.signature) {
        return Err(ArtifactError::BadSignature(key.to_string()));
    }
    let signer = Signer { key, trusted: trusted.contains(&key) };
    if !trusted.is_empty() && !signer.trusted {
        return Err(ArtifactError::Untrusted(key.to_string()));
    }
    Ok(Some(signer))
}

/// Verifies and decodes artifact bytes under a trust policy (see the module doc).
pub fn load(bytes: &[u8], trusted: &TrustedKeys) -> Result<Loaded, ArtifactError> {
    let envelope = read_envelope(bytes)?;
    let signer = check_signature(&envelope, trusted)?;
    let Envelope { header, payload, .. } = envelope;
    if header.compiler != env!("CARGO_PKG_VERSION") {
        return Err(ArtifactError::CompilerMismatch {
            found: header.compiler,
            current: env!("CARGO_PKG_VERSION").to_string(),
        });
    }
    if header.contract != crate::program::CONTRACT {
        return Err(ArtifactError::Contract {
            found: header.contract,
            supported: crate::program::CONTRACT.to_string(),
        });
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(ArtifactError::Payload(format!("{} bytes is over the {MAX_PAYLOAD} byte limit", payload.len())));
    }
    let checksum: [u8; 32] = Sha256::digest(payload).into();
    if checksum != header.checksum {
        return Err(ArtifactError::Checksum);
    }
    let mut program: Program = codec::decode(payload).map_err(|error| ArtifactError::Payload(error.to_string()))?;
    verify(&program)?;
    check_tables(&program)?;
    if !signer.is_some_and(|signer| signer.trusted) {
        recompile_scripts(&mut program)?;
    }
    Ok(Loaded { header, program, signer })
}

/// Verifies and decodes artifact bytes with no trusted keys: an unsigned file loads, a
/// signed one must verify, and every script is recompiled from its source.
pub fn decode(bytes: &[u8]) -> Result<Program, ArtifactError> {
    load(bytes, &TrustedKeys::default()).map(|loaded| loaded.program)
}

/// Replaces every script's bytecode with a fresh compilation of its carried source.
fn recompile_scripts(program: &mut Program) -> Result<(), ArtifactError> {
    for index in 0..program.workflows.len() {
        let slug = program.str(program.workflows[index].slug).to_string();
        for script_index in 0..program.workflows[index].scripts.len() {
            let script = &program.workflows[index].scripts[script_index];
            let path = program.str(script.path).to_string();
            let name = crate::script::module_name(&slug, &path);
            let bytecode = crate::script::module_bytecode(&name, program.str(script.source)).map_err(|error| {
                ArtifactError::Script { workflow: slug.clone(), path: path.clone(), message: error.to_string() }
            })?;
            program.workflows[index].scripts[script_index].bytecode = bytecode;
        }
    }
    Ok(())
}
