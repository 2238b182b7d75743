//! Loading a session: its three files checked against each other, and the salvage
//! `--repair` keeps when they disagree.
//!
//! The one thing to know: only the states a crash can leave are accepted (see the crash
//! table in the parent module); everything else is an error text naming what is wrong,
//! and nothing here writes to disk. Every seal must hold its MAC under a configured key
//! and every record after the sealed prefix its record MAC; a session sealed without a
//! key (an earlier build's, or a downgrade forged to look like one) is refused unless
//! the caller adopts unkeyed sessions explicitly ([`Trust::adopt_unkeyed`]).

use std::io;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::super::SessionState;
use super::files::{read_at_most, read_if_exists};

/// The most bytes of a seal file a load reads: both slots, or an earlier build's JSON
/// seal, fit well within it.
const SEAL_READ_LIMIT: u64 = 4096;
use super::format::{
    LOG_HEADER_BYTES, LogHeader, RECORD_HEADER_BYTES, Seal, SealSource, SealedBy, Sha256Digest, Snapshot, TailRest,
    decode_step, digest_of, intact_record_at, keyed_json, record_tag_holds, record_tag_key, scan_tail, sha256,
};
use super::seal_key::SealKeys;
use super::{CHECKPOINT_FILE, LOG_FILE, SEAL_FILE};

/// A session's files, read in the order a writer's crash-safe sequence needs: the
/// snapshot, then the seal, then the log (so a commit racing the read can only make
/// the log longer than the seal says, never shorter).
pub(super) struct Files {
    pub checkpoint: Option<Vec<u8>>,
    pub seal: Option<Vec<u8>>,
    pub log: Option<Vec<u8>>,
}

impl Files {
    pub fn read(runtime_dir: &Path) -> io::Result<Self> {
        let checkpoint = read_if_exists(&runtime_dir.join(CHECKPOINT_FILE))?;
        // The seal is two small slots (or an earlier build's JSON): anything longer is
        // damage, refused without being read whole.
        let seal = read_at_most(&runtime_dir.join(SEAL_FILE), SEAL_READ_LIMIT)?;
        let log = read_if_exists(&runtime_dir.join(LOG_FILE))?;
        Ok(Self { checkpoint, seal, log })
    }
}

/// The keys a load checks seals and records with, and whether it accepts a session
/// sealed without a key.
#[derive(Clone, Copy)]
pub(super) struct Trust<'a> {
    pub keys: &'a SealKeys,
    /// Accept an earlier build's unkeyed seal and log (an explicit adoption: the
    /// caller then reseals the session under the current key).
    pub adopt_unkeyed: bool,
}

/// Why a load refused a session.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The files are damaged or were changed; the text says how.
    Damage(String),
    /// The seal (or a step after it) was made without a key: an earlier build's
    /// session, or one rewritten into that format; only an explicit adoption loads it.
    Unkeyed,
}

impl From<String> for Refusal {
    fn from(what: String) -> Self {
        Self::Damage(what)
    }
}

/// What a load leaves for the writer to finish, so the files agree again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settle {
    /// The seal vouches for this snapshot and a prefix of the log.
    Log {
        /// Cut the log back to `log_len` (a torn last append).
        cut_torn_tail: bool,
        /// How many whole steps follow the sealed one (synced, their seal not yet on
        /// disk): the next seal vouches for them.
        unsealed_steps: usize,
    },
    /// The new snapshot is in place: start its empty log and seal it.
    FinishCompaction,
}

impl Settle {
    pub const NOTHING: Self = Self::Log { cut_torn_tail: false, unsealed_steps: 0 };
}

/// A verified session.
pub(super) struct Loaded {
    pub state: SessionState,
    pub generation: u64,
    pub checkpoint_len: u64,
    pub checkpoint_sha256: Sha256Digest,
    /// The length of the log to keep, and the running digest of those bytes.
    pub log_len: u64,
    pub log_digest: Sha256,
    /// The seal that vouched: which slot (the next seal goes into the other), or an
    /// earlier build's seal, to be rewritten with slots.
    pub seal_source: SealSource,
    pub settle: Settle,
    /// Which key made the seal that vouched.
    pub sealed_by: SealedBy,
    /// Whether the log is keyed (records end in a MAC).
    pub log_keyed: bool,
}

impl Loaded {
    /// Whether the session must be rewritten under the current key before a writer
    /// appends to it: sealed under a previous key or none, or an unkeyed log.
    pub(crate) fn needs_reseal(&self) -> bool {
        self.sealed_by != SealedBy::Key(0) || !self.log_keyed
    }
}

/// Checks the files; `Ok(None)` when the session does not exist (or its creation was
/// cut before its one sync), `Err` names the damage.
pub(super) fn verify(files: &Files, trust: Trust<'_>) -> Result<Option<Loaded>, Refusal> {
    if files.checkpoint.is_none() {
        let header = files.log.as_deref().map(LogHeader::decode);
        match (files.log.as_deref(), header) {
            (Some(log), Some(Ok(header))) if header.genesis => {
                return verify_genesis(files.seal.as_deref(), log, trust);
            }
            // What a creation cut short leaves: no seal (the first is written after the
            // creation's sync) and a log with no whole header.
            (_, None | Some(Err(_))) if files.seal.is_none() => return Ok(None),
            _ => {}
        }
    }
    let (checkpoint, seal, log) = match (&files.checkpoint, &files.seal, &files.log) {
        (Some(checkpoint), Some(seal), Some(log)) => (checkpoint, seal, log),
        (None, _, _) => {
            return Err(Refusal::Damage(
                "checkpoint.json is missing while the session's log or seal exists".to_string(),
            ));
        }
        (_, None, _) => {
            return Err(Refusal::Damage(
                "the seal (checkpoints/seal) is missing, so nothing vouches for the log".to_string(),
            ));
        }
        (_, Some(seal), None) => {
            return Err(Refusal::Damage(match Seal::decode_file(seal, trust.keys) {
                Ok((seal, _, _)) => format!(
                    "the step log is missing; the seal says it held {} bytes through step {}",
                    seal.log_len, seal.seq
                ),
                Err(_) => "the step log is missing".to_string(),
            }));
        }
    };
    let snapshot = parse_snapshot(checkpoint)?;
    let (seal, seal_source, sealed_by) = Seal::decode_file(seal, trust.keys)?;
    if sealed_by == SealedBy::Unkeyed && !trust.adopt_unkeyed {
        return Err(Refusal::Unkeyed);
    }
    let header = LogHeader::decode(log).map_err(|what| format!("the step log {what}"))?;
    let sealed = SealedWith { seal: &seal, source: seal_source, by: sealed_by };
    let loaded = if seal.generation == snapshot.generation {
        check_header(header, &snapshot, false)?;
        verify_current(checkpoint, snapshot, sealed, log, LOG_HEADER_BYTES, trust)?
    } else if seal.generation.checked_add(1) == Some(snapshot.generation) {
        verify_interrupted_compaction(checkpoint, snapshot, sealed, header, log)?
    } else {
        return Err(Refusal::Damage(format!(
            "checkpoint.json is snapshot {} but the seal belongs to snapshot {}",
            snapshot.generation, seal.generation
        )));
    };
    Ok(Some(loaded))
}

/// The seal that vouches, where it was read and which key made it.
#[derive(Clone, Copy)]
struct SealedWith<'a> {
    seal: &'a Seal,
    source: SealSource,
    by: SealedBy,
}

fn parse_snapshot(checkpoint: &[u8]) -> Result<Snapshot, String> {
    let snapshot: Snapshot = serde_json::from_slice(checkpoint)
        .map_err(|error| format!("checkpoint.json is not a valid snapshot ({error})"))?;
    if snapshot.state.seq != snapshot.seq {
        return Err(format!(
            "checkpoint.json says step {} but its state is at step {}",
            snapshot.seq, snapshot.state.seq
        ));
    }
    Ok(snapshot)
}

/// The usual case: the seal vouches for this snapshot and a prefix of its log; whole
/// steps may follow it (their seal was not on disk when the machine stopped), then a
/// torn append.
fn verify_current(
    checkpoint: &[u8],
    snapshot: Snapshot,
    sealed: SealedWith<'_>,
    log: &[u8],
    records_from: usize,
    trust: Trust<'_>,
) -> Result<Loaded, Refusal> {
    let seal = sealed.seal;
    let checkpoint_sha256 = sha256(checkpoint);
    if checkpoint_sha256 != seal.checkpoint_sha256 {
        return Err(Refusal::Damage(
            "checkpoint.json does not match the seal's digest of it: it was changed or damaged".to_string(),
        ));
    }
    let keyed = LogHeader::decode(log).map_err(|what| format!("the step log {what}"))?.keyed;
    let sealed_end = sealed_end(seal, log)?;
    if sealed_end < records_from {
        return Err(Refusal::Damage(format!(
            "the seal's log length {sealed_end} ends inside the step log's first record, the session's snapshot"
        )));
    }
    let mut state = snapshot.state;
    replay(log, records_from, sealed_end, &mut state, keyed)?;
    let mut log_digest = Sha256::new();
    log_digest.update(&log[..sealed_end]);
    if digest_of(&log_digest) != seal.log_sha256 {
        return Err(Refusal::Damage(format!(
            "the step log's first {sealed_end} bytes do not match the seal's digest: a record was rewritten"
        )));
    }
    if state.seq != seal.seq {
        return Err(Refusal::Damage(format!(
            "the step log holds steps through {} but the seal says {}",
            state.seq, seal.seq
        )));
    }
    let (log_len, settle) = verify_tail(log, sealed_end, &mut state, &mut log_digest, keyed, trust)?;
    Ok(Loaded {
        state,
        generation: snapshot.generation,
        checkpoint_len: checkpoint.len() as u64,
        checkpoint_sha256,
        log_len,
        log_digest,
        seal_source: sealed.source,
        settle,
        sealed_by: sealed.by,
        log_keyed: keyed,
    })
}

/// Refuses a log that does not follow `snapshot` (or follows it as a new session's
/// genesis log when `genesis` says it should not, or the reverse).
fn check_header(header: LogHeader, snapshot: &Snapshot, genesis: bool) -> Result<(), Refusal> {
    let expected = LogHeader { generation: snapshot.generation, base_seq: snapshot.seq, keyed: header.keyed, genesis };
    if header != expected {
        return Err(Refusal::Damage(format!(
            "the step log follows snapshot {} at step {}, but checkpoint.json is snapshot {} at step {}",
            header.generation, header.base_seq, expected.generation, expected.base_seq
        )));
    }
    Ok(())
}

/// Applies the whole records after the sealed end (each checked by its MAC in a keyed
/// log); returns the length of the log to keep and what the writer must settle.
fn verify_tail(
    log: &[u8],
    sealed_end: usize,
    state: &mut SessionState,
    log_digest: &mut Sha256,
    keyed: bool,
    trust: Trust<'_>,
) -> Result<(u64, Settle), Refusal> {
    let tail = scan_tail(log, sealed_end);
    if !keyed && !tail.records.is_empty() && !trust.adopt_unkeyed {
        return Err(Refusal::Unkeyed);
    }
    for &(offset, payload) in &tail.records {
        let record = format!("the step log's record at byte {offset}, after the sealed step,");
        if keyed && !record_tag_holds(trust.keys, &digest_of(log_digest), payload) {
            return Err(Refusal::Damage(format!(
                "{record} fails its MAC: it was appended or rewritten by someone without the seal key"
            )));
        }
        apply_next_step(state, payload, keyed, &record)?;
        log_digest.update(&log[offset..offset + RECORD_HEADER_BYTES + payload.len()]);
    }
    let cut_torn_tail = match tail.rest {
        TailRest::Empty | TailRest::Spare => false,
        TailRest::Torn => true,
        TailRest::Damaged(what) => return Err(Refusal::Damage(what)),
    };
    Ok((tail.end as u64, Settle::Log { cut_torn_tail, unsealed_steps: tail.records.len() }))
}

/// A new session's genesis log (no `checkpoint.json` yet): its first record is the
/// snapshot, proved by its MAC; a whole seal, when there is one, vouches for a prefix
/// as usual. With no whole seal (none is written before the first step's commit, and
/// a power loss can take an unsynced one) every record is proved by its MAC alone. A
/// first record that is not whole, with no whole seal, is a creation cut before its
/// one sync: no session.
fn verify_genesis(seal: Option<&[u8]>, log: &[u8], trust: Trust<'_>) -> Result<Option<Loaded>, Refusal> {
    let header = LogHeader::decode(log).map_err(|what| format!("the step log {what}"))?;
    let sealed = seal.and_then(|seal| Seal::decode_file(seal, trust.keys).ok());
    let Some((genesis, genesis_end)) = intact_record_at(log, LOG_HEADER_BYTES) else {
        return match sealed {
            None => Ok(None),
            Some(_) => Err(Refusal::Damage(
                "the step log's first record, the session's snapshot, fails its checksum".to_string(),
            )),
        };
    };
    let header_digest = sha256(&log[..LOG_HEADER_BYTES]);
    let (Some(key), Some(json)) = (record_tag_key(trust.keys, &header_digest, genesis), keyed_json(genesis)) else {
        return Err(Refusal::Damage(
            "the step log's first record, the session's snapshot, fails its MAC: it was written by someone without the seal key"
                .to_string(),
        ));
    };
    let snapshot = parse_snapshot(json).map_err(|what| what.replace("checkpoint.json", "the step log's snapshot"))?;
    check_header(header, &snapshot, true)?;
    if let Some((seal, source, by)) = &sealed {
        if seal.generation != 0 {
            return Err(Refusal::Damage(format!(
                "the step log is a new session's, but the seal belongs to snapshot {}",
                seal.generation
            )));
        }
        if *by == SealedBy::Unkeyed {
            return Err(Refusal::Damage("a new session's seal was made without the seal key".to_string()));
        }
        let sealed = SealedWith { seal, source: *source, by: *by };
        return verify_current(json, snapshot, sealed, log, genesis_end, trust).map(Some);
    }
    let mut state = snapshot.state;
    let mut log_digest = Sha256::new();
    log_digest.update(&log[..genesis_end]);
    let (log_len, settle) = verify_tail(log, genesis_end, &mut state, &mut log_digest, true, trust)?;
    Ok(Some(Loaded {
        state,
        generation: 0,
        checkpoint_len: json.len() as u64,
        checkpoint_sha256: sha256(json),
        log_len,
        log_digest,
        seal_source: SealSource::Missing,
        settle,
        sealed_by: SealedBy::Key(key),
        log_keyed: true,
    }))
}

/// A compaction replaced the snapshot but did not get to seal it: the seal still
/// vouches for the previous snapshot's log (synced before the compaction began), which
/// must end where the new snapshot does.
fn verify_interrupted_compaction(
    checkpoint: &[u8],
    snapshot: Snapshot,
    sealed: SealedWith<'_>,
    header: LogHeader,
    log: &[u8],
) -> Result<Loaded, String> {
    let seal = sealed.seal;
    if seal.seq != snapshot.seq {
        return Err(format!(
            "checkpoint.json (snapshot {}) folds steps through {} but the last sealed step is {}",
            snapshot.generation, snapshot.seq, seal.seq
        ));
    }
    let fresh_log =
        LogHeader { generation: snapshot.generation, base_seq: snapshot.seq, keyed: header.keyed, genesis: false };
    if header == fresh_log {
        if log.len() != LOG_HEADER_BYTES {
            return Err("the new snapshot's step log holds bytes it was never sealed for".to_string());
        }
    } else if header.generation == seal.generation {
        let sealed_end = sealed_end(seal, log)?;
        if sha256(&log[..sealed_end]) != seal.log_sha256 {
            return Err(format!(
                "the step log's first {sealed_end} bytes do not match the seal's digest: a record was rewritten"
            ));
        }
        let tail = scan_tail(log, sealed_end);
        if let TailRest::Damaged(what) = tail.rest {
            return Err(what);
        }
        if let Some(&(offset, _)) = tail.records.first() {
            return Err(format!(
                "the step log holds a step at byte {offset} after step {}, which checkpoint.json (snapshot {}) already folds",
                seal.seq, snapshot.generation
            ));
        }
    } else {
        return Err(format!(
            "the step log follows snapshot {}, but checkpoint.json is snapshot {} and the seal snapshot {}",
            header.generation, snapshot.generation, seal.generation
        ));
    }
    Ok(Loaded {
        checkpoint_len: checkpoint.len() as u64,
        checkpoint_sha256: sha256(checkpoint),
        generation: snapshot.generation,
        state: snapshot.state,
        log_len: 0,
        log_digest: Sha256::new(),
        seal_source: sealed.source,
        settle: Settle::FinishCompaction,
        sealed_by: sealed.by,
        log_keyed: true,
    })
}

/// Where the sealed part of the log ends, when the log is that long.
fn sealed_end(seal: &Seal, log: &[u8]) -> Result<usize, String> {
    match usize::try_from(seal.log_len) {
        Ok(end) if end < LOG_HEADER_BYTES => Err(format!("the seal's log length {end} is shorter than the log header")),
        Ok(end) if end <= log.len() => Ok(end),
        _ => Err(format!(
            "the step log is {} bytes but the seal says {} bytes through step {}: it was cut short",
            log.len(),
            seal.log_len,
            seal.seq
        )),
    }
}

/// Applies every record in `log[from..to]`, each of which must be intact and the next step.
fn replay(log: &[u8], from: usize, to: usize, state: &mut SessionState, keyed: bool) -> Result<(), String> {
    let mut offset = from;
    while offset < to {
        let Some((payload, end)) = intact_record_at(log, offset).filter(|&(_, end)| end <= to) else {
            return Err(format!(
                "the step log's record at byte {offset} (step {}) fails its checksum",
                state.seq.saturating_add(1)
            ));
        };
        apply_next_step(state, payload, keyed, &format!("the step log's record at byte {offset}"))?;
        offset = end;
    }
    Ok(())
}

/// What `--repair` keeps: the snapshot plus the longest run of intact, consecutive
/// records of its own log.
pub(super) struct Salvage {
    pub state: SessionState,
    pub generation: u64,
    pub checkpoint_sha256: Sha256Digest,
    /// The new log: header and the kept records, byte for byte.
    pub log: Vec<u8>,
    /// The last step the old seal vouched for, when it is readable.
    pub sealed_seq: Option<u64>,
    /// How many bytes of the old log are not kept.
    pub dropped_bytes: u64,
}

/// The longest verified prefix, or why there is none (the snapshot itself is damaged,
/// or no seal made under the key vouches for it). In a keyed log, a record whose MAC
/// fails ends the prefix like a damaged one; an unkeyed log keeps no record unless the
/// caller adopts unkeyed sessions.
pub(super) fn salvage(files: &Files, trust: Trust<'_>) -> Result<Salvage, String> {
    let keys = trust.keys;
    let Some(checkpoint) = &files.checkpoint else {
        return match files.log.as_deref() {
            Some(log) if LogHeader::decode(log).is_ok_and(|header| header.genesis) => salvage_genesis(files, log, keys),
            _ => Err("checkpoint.json is missing, so there is no verified state to keep".to_string()),
        };
    };
    let snapshot = parse_snapshot(checkpoint).map_err(|what| format!("{what}; there is no verified state to keep"))?;
    let sealed = files.seal.as_deref().and_then(|seal| Seal::decode_file(seal, keys).ok());
    let vouched = matches!(sealed, Some((seal, _, SealedBy::Key(_))) if seal.checkpoint_sha256 == sha256(checkpoint));
    if !vouched && !trust.adopt_unkeyed {
        return Err(
            "no seal made under the seal key vouches for checkpoint.json, so there is no verified state to keep"
                .to_string(),
        );
    }
    let old_log = files.log.as_deref().unwrap_or_default();
    let old_header = LogHeader::decode(old_log).ok();
    let header = LogHeader {
        generation: snapshot.generation,
        base_seq: snapshot.seq,
        keyed: old_header.is_none_or(|header| header.keyed),
        genesis: false,
    };
    let mut state = snapshot.state;
    let mut kept = header.encode();
    let mut offset = LOG_HEADER_BYTES;
    if old_header == Some(header) && (header.keyed || trust.adopt_unkeyed) {
        let mut prefix = Sha256::new();
        prefix.update(&kept);
        while let Some((payload, end)) = intact_record_at(old_log, offset) {
            if header.keyed && !record_tag_holds(keys, &digest_of(&prefix), payload) {
                break;
            }
            match decode_step(payload, header.keyed) {
                Ok(delta) if Some(delta.seq) == state.seq.checked_add(1) => state.apply(&delta),
                _ => break,
            }
            kept.extend_from_slice(&old_log[offset..end]);
            prefix.update(&old_log[offset..end]);
            offset = end;
        }
    } else {
        offset = 0;
    }
    let sealed_seq = sealed.map(|(seal, _, _)| seal.seq);
    Ok(Salvage {
        state,
        generation: snapshot.generation,
        checkpoint_sha256: sha256(checkpoint),
        log: kept,
        sealed_seq,
        dropped_bytes: old_log.len().saturating_sub(offset) as u64,
    })
}

/// [`salvage`] of a new session's genesis log: its snapshot, proved by its MAC, and
/// the intact records after it that are the next steps and carry their MACs.
fn salvage_genesis(files: &Files, log: &[u8], keys: &SealKeys) -> Result<Salvage, String> {
    let no_state = || {
        "the step log's first record, the session's snapshot, is damaged, so there is no verified state to keep"
            .to_string()
    };
    let (genesis, genesis_end) = intact_record_at(log, LOG_HEADER_BYTES).ok_or_else(no_state)?;
    let json = keyed_json(genesis).filter(|_| record_tag_holds(keys, &sha256(&log[..LOG_HEADER_BYTES]), genesis));
    let snapshot = json.and_then(|json| parse_snapshot(json).ok()).ok_or_else(no_state)?;
    let checkpoint_sha256 = json.map(sha256).ok_or_else(no_state)?;
    let mut state = snapshot.state;
    let mut prefix = Sha256::new();
    prefix.update(&log[..genesis_end]);
    let mut offset = genesis_end;
    while let Some((payload, end)) = intact_record_at(log, offset) {
        if !record_tag_holds(keys, &digest_of(&prefix), payload) {
            break;
        }
        match decode_step(payload, true) {
            Ok(delta) if Some(delta.seq) == state.seq.checked_add(1) => state.apply(&delta),
            _ => break,
        }
        prefix.update(&log[offset..end]);
        offset = end;
    }
    let sealed_seq =
        files.seal.as_deref().and_then(|seal| Seal::decode_file(seal, keys).ok()).map(|(seal, _, _)| seal.seq);
    Ok(Salvage {
        state,
        generation: 0,
        checkpoint_sha256,
        log: log[..offset].to_vec(),
        sealed_seq,
        dropped_bytes: log.len().saturating_sub(offset) as u64,
    })
}

/// Decodes one record and applies it, refusing one that is not the very next step.
/// `record` names the record in the refusal ("the unsealed last record", "the step
/// log's record at byte 120").
fn apply_next_step(state: &mut SessionState, payload: &[u8], keyed: bool, record: &str) -> Result<(), String> {
    let delta = decode_step(payload, keyed).map_err(|what| format!("{record} {what}"))?;
    if Some(delta.seq) != state.seq.checked_add(1) {
        return Err(format!(
            "{record} holds step {} where step {} was expected",
            delta.seq,
            state.seq.saturating_add(1)
        ));
    }
    state.apply(&delta);
    Ok(())
}
