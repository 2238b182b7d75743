//! The on-disk formats of the store's three files: the snapshot, the log and the seal.
//!
//! The one thing to know: every byte the store trusts is covered twice, by a CRC-32 in
//! its frame (which tells a torn write from damage) and by the seal's SHA-256 of the
//! whole log (which tells a log cut at a record boundary, or rewritten, from the log
//! that was committed).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::super::{Delta, SessionState};

/// The log starts with these bytes, then the generation, the base seq and a CRC-32.
const LOG_MAGIC: &[u8; 8] = b"AMXLOG1\0";
pub(super) const LOG_HEADER_BYTES: usize = 28;
pub(super) const RECORD_HEADER_BYTES: usize = 12;

/// `checkpoint.json`: the state folded up to `seq`, the `generation`-th snapshot.
#[derive(Deserialize)]
pub(super) struct Snapshot {
    pub generation: u64,
    pub seq: u64,
    pub state: SessionState,
}

#[derive(Serialize)]
pub(super) struct SnapshotToStore<'a> {
    pub generation: u64,
    pub seq: u64,
    pub state: &'a SessionState,
}

/// `seal`: what was committed last, rewritten after every commit.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(super) struct Seal {
    /// The snapshot generation the log follows.
    pub generation: u64,
    /// The last committed step.
    pub seq: u64,
    /// The log's length through that step, header included.
    pub log_len: u64,
    /// SHA-256 of those `log_len` bytes, hex.
    pub log_sha256: String,
    /// SHA-256 of `checkpoint.json`, hex.
    pub checkpoint_sha256: String,
}

/// The log's header: which snapshot it follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LogHeader {
    pub generation: u64,
    /// The snapshot's seq; the first record holds `base_seq + 1`.
    pub base_seq: u64,
}

impl LogHeader {
    pub fn encode(self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(LOG_HEADER_BYTES);
        bytes.extend_from_slice(LOG_MAGIC);
        bytes.extend_from_slice(&self.generation.to_le_bytes());
        bytes.extend_from_slice(&self.base_seq.to_le_bytes());
        let crc = crc32(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// The header at the start of `log`, or what is wrong with it.
    pub fn decode(log: &[u8]) -> Result<Self, &'static str> {
        let Some(header) = log.get(..LOG_HEADER_BYTES) else {
            return Err("is shorter than its header");
        };
        if &header[..8] != LOG_MAGIC {
            return Err("does not start with the log header");
        }
        if Some(crc32(&header[..24])) != le_u32(header, 24) {
            return Err("has a damaged header");
        }
        match (le_u64(header, 8), le_u64(header, 16)) {
            (Some(generation), Some(base_seq)) => Ok(Self { generation, base_seq }),
            _ => Err("has a damaged header"),
        }
    }
}

/// Frames `payload` as a log record; `None` when it is too long for the length field.
/// A record is `<u32 payload length LE><u32 CRC-32 of payload LE><u32 CRC-32 of the
/// previous 8 bytes LE><payload>`, the payload being the step's [`Delta`] as JSON.
pub(super) fn encode_record(payload: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(payload.len()).ok()?;
    let mut record = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&crc32(payload).to_le_bytes());
    let header_crc = crc32(&record);
    record.extend_from_slice(&header_crc.to_le_bytes());
    record.extend_from_slice(payload);
    Some(record)
}

/// The payload and end of the record at `offset` when both checksums hold.
pub(super) fn intact_record_at(log: &[u8], offset: usize) -> Option<(&[u8], usize)> {
    let header = log.get(offset..offset.checked_add(RECORD_HEADER_BYTES)?)?;
    if !record_header_is_intact(header) {
        return None;
    }
    let start = offset + RECORD_HEADER_BYTES;
    let end = start.checked_add(usize::try_from(le_u32(header, 0)?).ok()?)?;
    let payload = log.get(start..end)?;
    (crc32(payload) == le_u32(header, 4)?).then_some((payload, end))
}

/// The step in an intact record's payload.
pub(super) fn decode_step(payload: &[u8]) -> Result<Delta, String> {
    serde_json::from_slice(payload).map_err(|error| format!("is not a step ({error})"))
}

/// What follows the sealed part of the log: the one append that may be unsealed.
pub(super) enum Tail<'a> {
    Empty,
    /// A strict prefix of a record (or an append whose bytes read as zeros): a crash
    /// mid-append, to be cut.
    Torn,
    /// One whole, intact record: appended and synced, the crash came before the seal.
    WholeStep(&'a [u8]),
    /// Anything else, saying what is wrong.
    Damaged(String),
}

/// Classifies the bytes of `log` from `sealed_end` on.
pub(super) fn classify_tail(log: &[u8], sealed_end: usize) -> Tail<'_> {
    let rest = log.get(sealed_end..).unwrap_or_default();
    if rest.is_empty() {
        return Tail::Empty;
    }
    if let Some((payload, end)) = intact_record_at(log, sealed_end) {
        return if end == log.len() {
            Tail::WholeStep(payload)
        } else {
            Tail::Damaged(format!("{} bytes follow the unsealed last step", log.len() - end))
        };
    }
    if rest.len() < RECORD_HEADER_BYTES || rest.iter().all(|&byte| byte == 0) {
        return Tail::Torn;
    }
    if !record_header_is_intact(rest) {
        return Tail::Damaged(format!(
            "the {} bytes after the last sealed step have a damaged record header",
            rest.len()
        ));
    }
    let frame_len = le_u32(rest, 0).map_or(usize::MAX, |len| (len as usize).saturating_add(RECORD_HEADER_BYTES));
    if rest.len() < frame_len {
        Tail::Torn
    } else {
        Tail::Damaged(format!("the complete record after the last sealed step (byte {sealed_end}) fails its checksum"))
    }
}

fn record_header_is_intact(header: &[u8]) -> bool {
    match (header.get(..8), le_u32(header, 8)) {
        (Some(covered), Some(header_crc)) => crc32(covered) == header_crc,
        _ => false,
    }
}

/// SHA-256 of `bytes`, hex.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The running digest's current value, hex.
pub(super) fn digest_hex(hasher: &Sha256) -> String {
    hex(&hasher.clone().finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// CRC-32/IEEE (the zip, PNG and Ethernet checksum), the one every frame carries.
pub(super) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}
