//! The on-disk formats of the store's three files: the snapshot, the log and the seal.
//!
//! The one thing to know: every byte the store trusts is covered by a CRC-32 in its
//! frame (which tells a torn write from damage), and the log's prefix through the
//! sealed step also by the seal's SHA-256 (which tells a log cut at a record boundary,
//! rolled back or rewritten from the log that was committed). The seal slot carries an
//! HMAC-SHA256 of its fields under the runner's seal key, and each record of a keyed log
//! (`AMXLOG2`) ends in an HMAC of the log before it plus its step, so neither a seal nor
//! an appended step can be made without the key. A new session's log (`AMXLOG3`) is
//! keyed the same way, its first record being the session's first snapshot. The seal file holds two fixed-size
//! slots written in place by turns, so a slot torn by a crash leaves the other, older
//! one vouching. The unkeyed formats of earlier builds (`AMXLOG1` logs, `AMXSEAL2`
//! slots, JSON seals) are still decoded, for an explicit adoption only.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::super::{Delta, SessionState};
use super::seal_key::{KeyId, SealKeys};

/// The log starts with these bytes, then the generation, the base seq and a CRC-32: a
/// keyed log, whose records end in a MAC.
const LOG_MAGIC: &[u8; 8] = b"AMXLOG2\0";
/// The header of a new session's log: keyed, and its first record is not a step but
/// the session's first snapshot (its genesis), so the log alone is the whole session
/// until the first compaction writes `checkpoint.json`.
const GENESIS_LOG_MAGIC: &[u8; 8] = b"AMXLOG3\0";
/// The header of an earlier build's log, whose records carry no MAC.
const UNKEYED_LOG_MAGIC: &[u8; 8] = b"AMXLOG1\0";
/// The length of a keyed record's MAC, at the end of its payload.
pub(super) const RECORD_TAG_BYTES: usize = 32;
/// What a record's MAC covers first, so it can never be mistaken for a seal's.
const RECORD_TAG_DOMAIN: &[u8] = b"archmax log record v2\0";
/// What a seal slot's MAC covers first.
const SEAL_TAG_DOMAIN: &[u8] = b"archmax seal v3\0";
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

/// A SHA-256 digest.
pub(super) type Sha256Digest = [u8; 32];

/// What the seal vouches for: the snapshot, and the log through one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seal {
    /// The snapshot generation the log follows.
    pub generation: u64,
    /// The last step vouched for.
    pub seq: u64,
    /// The log's length through that step, header included.
    pub log_len: u64,
    /// SHA-256 of those `log_len` bytes.
    pub log_sha256: Sha256Digest,
    /// SHA-256 of `checkpoint.json`.
    pub checkpoint_sha256: Sha256Digest,
}

/// Each of the seal file's two slots is this long (a disk sector, so a slot is written
/// whole or not at all), and the file holds exactly two.
pub(super) const SEAL_SLOT_BYTES: usize = 512;
pub(super) const SEAL_FILE_BYTES: usize = 2 * SEAL_SLOT_BYTES;
/// A keyed slot starts with these bytes; then generation, seq, log length, the two
/// digests, the sealing key's id, the HMAC-SHA256 of everything before it under that
/// key, and a CRC-32 of everything before it; zeros pad it to [`SEAL_SLOT_BYTES`].
const SEAL_MAGIC: &[u8; 8] = b"AMXSEAL3";
/// An earlier build's unkeyed slot: the same fields without key id and MAC.
const UNKEYED_SEAL_MAGIC: &[u8; 8] = b"AMXSEAL2";
const SEAL_FIELDS_BYTES: usize = 8 + 3 * 8 + 2 * 32;
const SEAL_MAC_AT: usize = SEAL_FIELDS_BYTES + 8;
const SEAL_COVERED_BYTES: usize = SEAL_MAC_AT + 32;

/// The seal as the store wrote it before it had slots (a JSON object replaced after
/// every commit): still read, so sessions written by earlier builds load.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacySeal {
    generation: u64,
    seq: u64,
    log_len: u64,
    log_sha256: String,
    checkpoint_sha256: String,
}

/// Where the seal that vouches came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SealSource {
    /// One of the two slots; the next seal goes into the other.
    Slot(usize),
    /// The JSON seal of an earlier build, rewritten with slots when the session is opened.
    Legacy,
    /// No whole seal: a new session's log, which vouches for itself (its genesis and
    /// every record carry a MAC), before its first seal reached the disk. The next
    /// seal is written whole, unsynced, with the current seal in slot 0.
    Missing,
}

/// Which key made the seal that vouches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SealedBy {
    /// The configured key at this index (0 is the current key; others are previous keys).
    Key(usize),
    /// No key: an earlier build's seal, or one made by someone without the key.
    Unkeyed,
}

/// What one slot holds.
enum SlotRead {
    Empty,
    /// Not whole: a torn write, or damage a CRC catches.
    Torn,
    Sealed(Seal, SealedBy),
    /// Whole, but its MAC does not hold: written by someone without the key.
    Forged(String),
}

impl Seal {
    /// The slot's bytes, sealed under the current key of `keys`.
    pub(crate) fn encode_slot(&self, keys: &SealKeys) -> [u8; SEAL_SLOT_BYTES] {
        let mut slot = self.encode_fields(SEAL_MAGIC);
        slot[SEAL_FIELDS_BYTES..SEAL_MAC_AT].copy_from_slice(&keys.current_key_id());
        let mac = keys.mac(&[SEAL_TAG_DOMAIN, &slot[..SEAL_MAC_AT]]);
        slot[SEAL_MAC_AT..SEAL_COVERED_BYTES].copy_from_slice(&mac);
        let crc = crc32(&slot[..SEAL_COVERED_BYTES]);
        slot[SEAL_COVERED_BYTES..SEAL_COVERED_BYTES + 4].copy_from_slice(&crc.to_le_bytes());
        slot
    }

    /// The slot an earlier build wrote (no key): what a downgrade would forge.
    #[cfg(test)]
    pub(crate) fn encode_unkeyed_slot(&self) -> [u8; SEAL_SLOT_BYTES] {
        let mut slot = self.encode_fields(UNKEYED_SEAL_MAGIC);
        let crc = crc32(&slot[..SEAL_FIELDS_BYTES]);
        slot[SEAL_FIELDS_BYTES..SEAL_FIELDS_BYTES + 4].copy_from_slice(&crc.to_le_bytes());
        slot
    }

    /// A slot with `magic` and the seal's fields, the rest zeros.
    fn encode_fields(&self, magic: &[u8; 8]) -> [u8; SEAL_SLOT_BYTES] {
        let mut slot = [0u8; SEAL_SLOT_BYTES];
        let fields: [&[u8]; 6] = [
            magic,
            &self.generation.to_le_bytes(),
            &self.seq.to_le_bytes(),
            &self.log_len.to_le_bytes(),
            &self.log_sha256,
            &self.checkpoint_sha256,
        ];
        let mut at = 0;
        for field in fields {
            slot[at..at + field.len()].copy_from_slice(field);
            at += field.len();
        }
        slot
    }

    /// A fresh seal file: this seal in slot 0 (under the current key), slot 1 empty.
    pub(crate) fn encode_file(&self, keys: &SealKeys) -> Vec<u8> {
        let mut file = vec![0u8; SEAL_FILE_BYTES];
        file[..SEAL_SLOT_BYTES].copy_from_slice(&self.encode_slot(keys));
        file
    }

    /// The seal's fields at the start of `covered` (after the magic).
    fn decode_fields(covered: &[u8]) -> Option<Self> {
        let digest = |at: usize| -> Option<Sha256Digest> { covered.get(at..at + 32)?.try_into().ok() };
        Some(Self {
            generation: le_u64(covered, 8)?,
            seq: le_u64(covered, 16)?,
            log_len: le_u64(covered, 24)?,
            log_sha256: digest(32)?,
            checkpoint_sha256: digest(64)?,
        })
    }

    /// The slot at the start of `bytes`, its MAC checked against `keys`.
    fn read_slot(bytes: &[u8], index: usize, keys: &SealKeys) -> SlotRead {
        if bytes.iter().all(|&byte| byte == 0) {
            return SlotRead::Empty;
        }
        if bytes.get(..8) == Some(UNKEYED_SEAL_MAGIC.as_slice()) {
            let Some(covered) = bytes.get(..SEAL_FIELDS_BYTES) else { return SlotRead::Torn };
            if le_u32(bytes, SEAL_FIELDS_BYTES) != Some(crc32(covered)) {
                return SlotRead::Torn;
            }
            return Self::decode_fields(covered)
                .map_or(SlotRead::Torn, |seal| SlotRead::Sealed(seal, SealedBy::Unkeyed));
        }
        let Some(covered) = bytes.get(..SEAL_COVERED_BYTES) else { return SlotRead::Torn };
        if &covered[..8] != SEAL_MAGIC || le_u32(bytes, SEAL_COVERED_BYTES) != Some(crc32(covered)) {
            return SlotRead::Torn;
        }
        let Some(seal) = Self::decode_fields(covered) else { return SlotRead::Torn };
        let mut key_id: KeyId = [0; 8];
        key_id.copy_from_slice(&covered[SEAL_FIELDS_BYTES..SEAL_MAC_AT]);
        let shown_id = archmax_program::hex::hex(&key_id);
        match keys.check_with_id(&key_id, &[SEAL_TAG_DOMAIN, &covered[..SEAL_MAC_AT]], &covered[SEAL_MAC_AT..]) {
            Ok(key) => SlotRead::Sealed(seal, SealedBy::Key(key)),
            Err(None) => SlotRead::Forged(format!(
                "the seal's slot {index} was made under key {shown_id}, which is neither the current seal key nor a previous one in {}: it was tampered with, or that key was removed before the session was resealed",
                keys.source()
            )),
            Err(Some(_)) => SlotRead::Forged(format!(
                "the seal's slot {index} fails its MAC under key {shown_id}: it was tampered with (written without the seal key)"
            )),
        }
    }

    /// The seal in a seal file: the newer of its whole slots (the other may be an older
    /// seal, empty, or torn by a crash while it was written), or an earlier build's JSON
    /// seal, with the key that made it. A whole slot whose MAC fails is never the result
    /// of a crash, so it is refused even when the other slot would vouch. `Err` says why
    /// none vouches.
    pub(crate) fn decode_file(bytes: &[u8], keys: &SealKeys) -> Result<(Self, SealSource, SealedBy), String> {
        if bytes.first() == Some(&b'{') {
            return decode_legacy(bytes).map(|seal| (seal, SealSource::Legacy, SealedBy::Unkeyed));
        }
        if bytes.len() != SEAL_FILE_BYTES {
            return Err(format!(
                "the seal is unreadable ({} bytes where {SEAL_FILE_BYTES} were expected)",
                bytes.len()
            ));
        }
        let slots = [&bytes[..SEAL_SLOT_BYTES], &bytes[SEAL_SLOT_BYTES..]]
            .iter()
            .enumerate()
            .map(|(index, slot)| Self::read_slot(slot, index, keys))
            .collect::<Vec<_>>();
        let mut newest: Option<(usize, Seal, SealedBy)> = None;
        for (index, slot) in slots.into_iter().enumerate() {
            match slot {
                SlotRead::Forged(what) => return Err(what),
                SlotRead::Sealed(seal, by) => {
                    if newest.is_none_or(|(_, best, _)| (seal.generation, seal.seq) > (best.generation, best.seq)) {
                        newest = Some((index, seal, by));
                    }
                }
                SlotRead::Empty | SlotRead::Torn => {}
            }
        }
        match newest {
            Some((index, seal, by)) => Ok((seal, SealSource::Slot(index), by)),
            None => Err("the seal is unreadable (neither of its two slots holds a whole seal)".to_string()),
        }
    }
}

fn decode_legacy(bytes: &[u8]) -> Result<Seal, String> {
    let legacy: LegacySeal =
        serde_json::from_slice(bytes).map_err(|error| format!("the seal is unreadable ({error})"))?;
    let digest = |hex: &str| {
        archmax_program::hex::decode_array::<32>(hex)
            .ok_or_else(|| "the seal is unreadable (a digest is not 64 hex digits)".to_string())
    };
    Ok(Seal {
        generation: legacy.generation,
        seq: legacy.seq,
        log_len: legacy.log_len,
        log_sha256: digest(&legacy.log_sha256)?,
        checkpoint_sha256: digest(&legacy.checkpoint_sha256)?,
    })
}

/// The log's header: which snapshot it follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LogHeader {
    pub generation: u64,
    /// The snapshot's seq; the first record holds `base_seq + 1`.
    pub base_seq: u64,
    /// Whether its records end in a MAC (every log this build writes), or are an
    /// earlier build's unkeyed records.
    pub keyed: bool,
    /// Whether its first record is the session's snapshot (a new session's log, always
    /// keyed and of generation 0).
    pub genesis: bool,
}

impl LogHeader {
    /// The header of a keyed log following `checkpoint.json`.
    pub fn keyed(generation: u64, base_seq: u64) -> Self {
        Self { generation, base_seq, keyed: true, genesis: false }
    }

    /// The header of a new session's log, whose first record is its snapshot at `base_seq`.
    pub fn genesis(base_seq: u64) -> Self {
        Self { generation: 0, base_seq, keyed: true, genesis: true }
    }

    pub fn encode(self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(LOG_HEADER_BYTES);
        bytes.extend_from_slice(match (self.keyed, self.genesis) {
            (_, true) => GENESIS_LOG_MAGIC,
            (true, false) => LOG_MAGIC,
            (false, false) => UNKEYED_LOG_MAGIC,
        });
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
        let (keyed, genesis) = match &header[..8] {
            magic if magic == LOG_MAGIC => (true, false),
            magic if magic == GENESIS_LOG_MAGIC => (true, true),
            magic if magic == UNKEYED_LOG_MAGIC => (false, false),
            _ => return Err("does not start with the log header"),
        };
        if Some(crc32(&header[..24])) != le_u32(header, 24) {
            return Err("has a damaged header");
        }
        match (le_u64(header, 8), le_u64(header, 16)) {
            (Some(generation), Some(base_seq)) => Ok(Self { generation, base_seq, keyed, genesis }),
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

/// The payload of a keyed record holding the step `json`, written after log bytes whose
/// SHA-256 is `prefix`: the step, then its MAC under the current key over the prefix's
/// digest and the step (so a record is bound to its place in this very log).
pub(super) fn keyed_payload(keys: &SealKeys, prefix: &Sha256Digest, json: &[u8]) -> Vec<u8> {
    let tag = keys.mac(&[RECORD_TAG_DOMAIN, prefix, json]);
    let mut payload = Vec::with_capacity(json.len() + RECORD_TAG_BYTES);
    payload.extend_from_slice(json);
    payload.extend_from_slice(&tag);
    payload
}

/// Whether a keyed record's MAC holds under one of `keys`, `prefix` being the SHA-256 of
/// the log bytes before it.
pub(super) fn record_tag_holds(keys: &SealKeys, prefix: &Sha256Digest, payload: &[u8]) -> bool {
    record_tag_key(keys, prefix, payload).is_some()
}

/// The JSON of a keyed record's payload, its MAC set aside.
pub(super) fn keyed_json(payload: &[u8]) -> Option<&[u8]> {
    payload.len().checked_sub(RECORD_TAG_BYTES).map(|split| &payload[..split])
}

/// Which of `keys` made a keyed record's MAC (0 is the current key), `prefix` being
/// the SHA-256 of the log bytes before it.
pub(super) fn record_tag_key(keys: &SealKeys, prefix: &Sha256Digest, payload: &[u8]) -> Option<usize> {
    let json = keyed_json(payload)?;
    keys.check_any(&[RECORD_TAG_DOMAIN, prefix, json], &payload[json.len()..])
}

/// The step in an intact record's payload (a keyed record's MAC set aside).
pub(super) fn decode_step(payload: &[u8], keyed: bool) -> Result<Delta, String> {
    let json = if keyed {
        let Some(split) = payload.len().checked_sub(RECORD_TAG_BYTES) else {
            return Err("is shorter than a keyed record's MAC".to_string());
        };
        &payload[..split]
    } else {
        payload
    };
    serde_json::from_slice(json).map_err(|error| format!("is not a step ({error})"))
}

/// The whole records from some offset of the log on, and what follows the last of them.
pub(super) struct Tail<'a> {
    /// Each whole, intact record: its offset and payload.
    pub records: Vec<(usize, &'a [u8])>,
    /// Where the last whole record ends (the offset scanned from, when there is none).
    pub end: usize,
    pub rest: TailRest,
}

/// The bytes after the last whole record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TailRest {
    Empty,
    /// Zeros only: the room a writer keeps for its next appends (see [`LOG_ROOM`]), or
    /// an append whose bytes never landed; kept, and written over by the next commit.
    Spare,
    /// A strict prefix of a record, a whole frame failing its checksum with only zeros
    /// after it, or a header failing its CRC with a sector piece of zeros, whatever follows
    /// it (an append into the room whose pages landed in part): a crash mid-append, to be
    /// cut.
    Torn,
    /// Anything else, saying what is wrong.
    Damaged(String),
}

/// The zeros a writer keeps after the log's last record, so that a commit overwrites
/// blocks the file already has and its `fdatasync` writes data alone: an append that
/// grew the file would also have to commit the file's new size to the journal, which
/// is what makes concurrent syncs queue behind one another. The room is refilled a
/// whole `LOG_ROOM` at a time and given back when the writer closes.
pub(super) const LOG_ROOM: u64 = 32 * 1024;

/// Scans `log` from `from` on: the run of intact records there, then what is left.
pub(super) fn scan_tail(log: &[u8], from: usize) -> Tail<'_> {
    let mut records = Vec::new();
    let mut end = from;
    while let Some((payload, next)) = intact_record_at(log, end) {
        records.push((end, payload));
        end = next;
    }
    Tail { records, end, rest: classify_rest(log, end) }
}

/// What the bytes of `log` from `end` on are, `end` being where no intact record starts.
fn classify_rest(log: &[u8], end: usize) -> TailRest {
    let rest = log.get(end..).unwrap_or_default();
    if rest.is_empty() {
        return TailRest::Empty;
    }
    if rest.iter().all(|&byte| byte == 0) {
        return TailRest::Spare;
    }
    if rest.len() < RECORD_HEADER_BYTES {
        return TailRest::Torn;
    }
    if !record_header_is_intact(rest) {
        // A header that landed proves it by its CRC; only one that did not can have
        // lost a sector.
        if header_never_landed(&rest[..RECORD_HEADER_BYTES], end) {
            return TailRest::Torn;
        }
        return TailRest::Damaged(format!(
            "the {} bytes at byte {end}, after the last whole step, have a damaged record header",
            rest.len()
        ));
    }
    let frame_len = le_u32(rest, 0).map_or(usize::MAX, |len| (len as usize).saturating_add(RECORD_HEADER_BYTES));
    // A frame failing its checksum is a torn append only where nothing but zeros (the
    // room it was written into) follows it: cutting it is what cutting a strict prefix
    // does, so it gives a writer without the key nothing a truncation would not.
    if rest.len() < frame_len || (rest.len() > frame_len && rest[frame_len..].iter().all(|&byte| byte == 0)) {
        TailRest::Torn
    } else {
        TailRest::Damaged(format!("the complete record at byte {end}, after the last whole step, fails its checksum"))
    }
}

/// The sector size the disk is assumed to write whole or not at all: the smallest any
/// drive has.
const SECTOR_BYTES: usize = 512;

/// Whether the record header `header`, at byte `at` of the log, is one whose sector never
/// reached the disk: an append into the room, whose later pages landed before a power
/// loss and whose first did not, leaves zeros where the header was written. The header is
/// cut at the sector boundaries inside it; one piece of nothing but zeros is such a
/// header (a header that straddles a boundary can lose either side). What follows it can
/// only be the rest of that unacknowledged append, so the tail from here is torn: cutting
/// it is cutting a strict prefix, which gives a writer without the key nothing, and a
/// record before it that a seal vouches for is still checked against the seal.
fn header_never_landed(header: &[u8], at: usize) -> bool {
    let mut start = 0;
    while start < header.len() {
        let sector_left = SECTOR_BYTES - (at + start) % SECTOR_BYTES;
        let end = header.len().min(start + sector_left);
        if header[start..end].iter().all(|&byte| byte == 0) {
            return true;
        }
        start = end;
    }
    false
}

fn record_header_is_intact(header: &[u8]) -> bool {
    match (header.get(..8), le_u32(header, 8)) {
        (Some(covered), Some(header_crc)) => crc32(covered) == header_crc,
        _ => false,
    }
}

/// SHA-256 of `bytes`.
pub(super) fn sha256(bytes: &[u8]) -> Sha256Digest {
    Sha256::digest(bytes).into()
}

/// The running digest's current value.
pub(super) fn digest_of(hasher: &Sha256) -> Sha256Digest {
    hasher.clone().finalize().into()
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

#[cfg(test)]
mod tail_tests {
    use super::{RECORD_HEADER_BYTES, TailRest, encode_record, scan_tail};

    /// `filler` bytes standing for the log before it, then a record whose header
    /// straddles the sector boundary at 512, with `damage` applied to its frame.
    fn tail_after(damage: impl Fn(&mut [u8])) -> TailRest {
        let filler = 506;
        let mut record = encode_record(&[b'x'; 900]).expect("record");
        damage(&mut record);
        let mut log = vec![0xa5; filler];
        log.extend_from_slice(&record);
        scan_tail(&log, filler).rest
    }

    /// A header that landed whole (its CRC holds) can have a one-byte sector piece that
    /// is zero by nature: at offset 511 mod 512 its first byte is the length's low byte, zero for a
    /// 256-byte payload. A payload that then fails its checksum, with a whole record
    /// after it (so not an append into the room), is damage, not a torn append.
    #[test]
    fn an_intact_header_whose_one_byte_piece_is_zero_is_not_a_torn_append() {
        let filler = 511;
        let mut record = encode_record(&[b'y'; 256]).expect("record");
        assert_eq!(record[0], 0, "the length's low byte");
        record[RECORD_HEADER_BYTES + 100] ^= 0x01;
        let mut log = vec![0xa5; filler];
        log.extend_from_slice(&record);
        log.extend_from_slice(&encode_record(&[b'z'; 300]).expect("next record"));
        assert!(
            matches!(scan_tail(&log, filler).rest, TailRest::Damaged(_)),
            "a landed header with a damaged payload, a whole record after it: {:?}",
            scan_tail(&log, filler).rest
        );
    }

    #[test]
    fn a_header_sector_of_zeros_is_a_torn_append_and_a_flipped_header_is_damage() {
        assert!(matches!(tail_after(|_| {}), TailRest::Empty));
        // The first sector (6 header bytes) never landed; the second did.
        assert_eq!(tail_after(|record| record[..6].fill(0)), TailRest::Torn);
        // The second sector never landed: the header's last 6 bytes and the payload.
        assert_eq!(tail_after(|record| record[6..].fill(0)), TailRest::Torn);
        // The whole header zeros, the payload there.
        assert_eq!(tail_after(|record| record[..RECORD_HEADER_BYTES].fill(0)), TailRest::Torn);
        // A flipped bit leaves no sector of zeros: damage, refused.
        assert!(
            matches!(tail_after(|record| record[1] ^= 0x10), TailRest::Damaged(what) if what.contains("damaged record header"))
        );
    }
}
