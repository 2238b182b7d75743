use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::format::{
    LOG_HEADER_BYTES, LogHeader, RECORD_HEADER_BYTES, RECORD_TAG_BYTES, SEAL_FILE_BYTES, SEAL_SLOT_BYTES, crc32,
    digest_of, encode_record, keyed_payload,
};
use super::*;
use crate::session::id::SessionId;
use crate::session::{Delta, Head, Message, Variable};
use archmax_program::hex::hex;

/// A unique directory under the system temp dir, removed on drop, and the seal keys of
/// the stores made in it.
struct TempDir(PathBuf, SealKeys);

impl TempDir {
    fn new(label: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
        let name = format!(
            "archmax-fs-store-{label}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        fs::create_dir_all(&path).expect("temp dir");
        Self(path, SealKeys::generate().expect("a key"))
    }

    fn store(&self) -> FsStore {
        FsStore::new(self.0.join("sessions"), self.1.clone())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn initial(id: &str) -> SessionState {
    SessionState {
        id: SessionId::from_store(id),
        head: Head { workflow: "w".into(), spec_hash: "h".into(), ..Head::default() },
        ..SessionState::default()
    }
}

fn step(seq: u64, text: &str) -> Delta {
    Delta {
        seq,
        head: Head { workflow: "w".into(), spec_hash: "h".into(), updated_at: seq, ..Head::default() },
        messages: vec![Message::User { text: text.to_string(), opening: None }],
        variables: vec![(format!("v{}", seq % 3), Some(Variable { value: seq.into(), locked: seq.is_multiple_of(2) }))],
        ..Delta::default()
    }
}

fn runtime_file(store: &FsStore, id: &str, file: &str) -> PathBuf {
    store.dir.join(id).join(RUNTIME_DIR).join(file)
}

fn log_path(store: &FsStore, id: &str) -> PathBuf {
    runtime_file(store, id, LOG_FILE)
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).expect("open log");
    file.write_all(bytes).expect("append");
}

/// A record of `delta` as long as a keyed one, its MAC zeros: for torn and damaged
/// appends, where only the frame matters.
fn record_of(delta: &Delta) -> Vec<u8> {
    let mut payload = serde_json::to_vec(delta).expect("json");
    payload.extend_from_slice(&[0; RECORD_TAG_BYTES]);
    encode_record(&payload).expect("record")
}

/// The records of `deltas` as the store's writer would append them after `log`: each
/// with its MAC under the store's key over the log before it.
fn keyed_records(store: &FsStore, log: &[u8], deltas: &[Delta]) -> Vec<u8> {
    let mut prefix = Sha256::new();
    prefix.update(log);
    let mut records = Vec::new();
    for delta in deltas {
        let json = serde_json::to_vec(delta).expect("json");
        let record = encode_record(&keyed_payload(store.seal_keys(), &digest_of(&prefix), &json)).expect("record");
        prefix.update(&record);
        records.extend(record);
    }
    records
}

/// Appends `deltas` to the session `s`'s log as a writer that died before sealing them would.
fn append_keyed(store: &FsStore, deltas: &[Delta]) {
    let log = fs::read(log_path(store, "s")).expect("log");
    append_bytes(&log_path(store, "s"), &keyed_records(store, &log, deltas));
}

/// Commits the next `count` steps and returns the expected state.
fn commit_steps(writer: &mut FsWriter, mut expected: SessionState, count: u64) -> SessionState {
    for seq in expected.seq + 1..=expected.seq + count {
        let delta = step(seq, &format!("message {seq}"));
        writer.commit(&delta).expect("commit");
        expected.apply(&delta);
    }
    expected
}

/// A session `s` with `count` committed steps, in the three-file layout (compacted once
/// after its creation, so its snapshot is `checkpoint.json`); returns the states after
/// each step (index 0 is the initial state) and the log's length after each step.
fn session_with_steps(store: &FsStore, count: u64) -> (Vec<SessionState>, Vec<usize>) {
    let mut writer = store.create_writer(&initial("s")).expect("create");
    writer.compact().expect("compact");
    let mut states = vec![initial("s")];
    let mut ends = vec![writer.log_len() as usize];
    for _ in 0..count {
        let next = commit_steps(&mut writer, states.last().cloned().expect("a state"), 1);
        states.push(next);
        ends.push(writer.log_len() as usize);
    }
    (states, ends)
}

/// Asserts the session is refused as damaged (what a repair mends), with a message naming
/// it and the damage (`needle`) and no command of the CLI's; and that neither a read nor
/// an open changed any file.
fn assert_refused(store: &FsStore, needle: &str) {
    let before = snapshot_of_files(store);
    for result in [store.read("s").map(|_| ()), store.open_writer("s").map(|_| ())] {
        let Err(error) = result else { panic!("a damaged session loaded") };
        assert!(matches!(&error, StoreError::Damaged { id, .. } if id == "s"), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("session `s`"), "{message}");
        assert!(message.contains(needle), "{message} should say {needle:?}");
        assert!(message.ends_with("Nothing was changed") && !message.contains("--repair"), "{message}");
    }
    assert_eq!(snapshot_of_files(store), before, "a load of a corrupt session changed the disk");
}

/// Every runtime file's name and bytes.
fn snapshot_of_files(store: &FsStore) -> Vec<(String, Vec<u8>)> {
    let dir = store.dir.join("s").join(RUNTIME_DIR);
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| {
                    (entry.file_name().to_string_lossy().into_owned(), fs::read(entry.path()).unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Asserts that a read and an open of `s` both load `expected` (the open settling what
/// it found), and returns the open's writer.
fn assert_loads(store: &FsStore, expected: &SessionState) -> FsWriter {
    assert_eq!(store.read("s").expect("read"), Some(expected.clone()));
    let (state, writer) = store.open_writer("s").expect("open");
    assert_eq!(&state, expected);
    writer
}

/// The seal that vouches, as a load reads it.
fn seal_of(store: &FsStore) -> Seal {
    let bytes = fs::read(runtime_file(store, "s", SEAL_FILE)).expect("seal");
    Seal::decode_file(&bytes, store.seal_keys()).expect("a readable seal").0
}

fn flip_bit(path: &Path, at: usize) {
    let mut bytes = fs::read(path).expect("read");
    bytes[at] ^= 0x04;
    fs::write(path, bytes).expect("write");
}

fn staging_leftovers(store: &FsStore) -> Vec<String> {
    let session = store.dir.join("s");
    [session.clone(), session.join(RUNTIME_DIR)]
        .iter()
        .flat_map(|dir| fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(STAGING_PREFIX))
        .collect()
}

#[test]
fn crc32_matches_the_standard_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
}

/// The frames' bytes, checked against values computed by an independent CRC-32/IEEE
/// implementation: a log written by an earlier build must still verify.
#[test]
fn log_frames_keep_their_on_disk_bytes() {
    let record = encode_record(b"123456789").expect("short payload");
    assert_eq!(hex(&record[..RECORD_HEADER_BYTES]), "090000002639f4cb3ed5e8a8");
    assert_eq!(&record[RECORD_HEADER_BYTES..], b"123456789");
    let header = LogHeader { generation: 3, base_seq: 41, keyed: false, genesis: false }.encode();
    assert_eq!(hex(&header), "414d584c4f473100030000000000000029000000000000004b63639e");
    assert_eq!(LogHeader::decode(&header), Ok(LogHeader { generation: 3, base_seq: 41, keyed: false, genesis: false }));
    let keyed = LogHeader::keyed(3, 41).encode();
    assert_eq!(&keyed[..8], b"AMXLOG2\0");
    assert_eq!(LogHeader::decode(&keyed), Ok(LogHeader::keyed(3, 41)));
}

#[test]
fn round_trip_through_log_and_snapshot() {
    let temp = TempDir::new("round-trip");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s1")).expect("create");
    let session_path = store.session_dir("s1").expect("dir");
    // A new session is its log (the first state is its genesis record); the first
    // commit writes the seal, the first compaction `checkpoint.json`.
    for name in ["checkpoints/log", "checkpoints/lock", "scratchpad", "artifacts"] {
        assert!(session_path.join(name).exists(), "{name}");
    }
    for name in ["checkpoints/checkpoint.json", "checkpoints/seal"] {
        assert!(!session_path.join(name).exists(), "{name}");
    }
    assert_eq!(&fs::read(session_path.join("checkpoints/log")).expect("log")[..8], b"AMXLOG3\0");
    let expected = commit_steps(&mut writer, initial("s1"), 3);
    assert!(session_path.join("checkpoints/seal").exists(), "the first commit's seal");
    assert_eq!(writer.state(), &expected);
    assert_eq!(store.read("s1").expect("read"), Some(expected.clone()));

    writer.compact().expect("compact");
    assert_eq!(writer.log_len(), LOG_HEADER_BYTES as u64);
    let expected = commit_steps(&mut writer, expected, 2);
    drop(writer);

    let (reopened, mut writer) = store.open_writer("s1").expect("open");
    assert_eq!(reopened, expected);
    let expected = commit_steps(&mut writer, expected, 1);
    drop(writer);
    assert_eq!(store.read("s1").expect("read"), Some(expected));
}

#[test]
fn create_exists_open_missing_read_none() {
    let temp = TempDir::new("exists");
    let store = temp.store();
    drop(store.create_writer(&initial("s")).expect("create"));
    assert!(matches!(store.create_writer(&initial("s")), Err(StoreError::Exists(id)) if id == "s"));
    assert!(matches!(store.open_writer("nope"), Err(StoreError::Missing(id)) if id == "nope"));
    assert!(matches!(store.read("nope"), Ok(None)));
    assert!(matches!(store.read("../escape"), Err(StoreError::Io { .. })));
    assert!(store.session_dir("/abs").is_err());
    assert!(staging_leftovers(&store).is_empty());
}

#[test]
fn a_torn_last_append_is_dropped_and_cut_on_the_next_open() {
    let temp = TempDir::new("torn");
    let store = temp.store();
    let (states, ends) = session_with_steps(&store, 2);
    let good_len = ends[2];

    let record = record_of(&step(3, "never committed"));
    // A torn append into the room: a whole frame failing its checksum, zeros after it.
    let mut into_room = record.clone();
    into_room[RECORD_HEADER_BYTES + 3] ^= 0x01;
    into_room.extend_from_slice(&[0; 100]);
    for torn in [&record[..5], &record[..RECORD_HEADER_BYTES + 4], &record[..record.len() - 1], &into_room[..]] {
        append_bytes(&log_path(&store, "s"), torn);
        assert_eq!(store.read("s").expect("read"), Some(states[2].clone()));
        assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len() as usize, good_len + torn.len());
        let (state, writer) = store.open_writer("s").expect("open");
        assert_eq!(state, states[2]);
        assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len() as usize, good_len);
        drop(writer);
    }
    // Zeros alone (an append whose bytes never landed, or a writer's room a crash left)
    // are kept as room while the session is open and given back when it closes.
    append_bytes(&log_path(&store, "s"), &[0u8; 40]);
    assert_eq!(store.read("s").expect("read"), Some(states[2].clone()));
    let (state, writer) = store.open_writer("s").expect("open");
    assert_eq!(state, states[2]);
    assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len() as usize, good_len + 40);
    drop(writer);
    assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len() as usize, good_len);

    append_bytes(&log_path(&store, "s"), &record[..record.len() / 2]);
    let (_, mut writer) = store.open_writer("s").expect("open");
    let expected = commit_steps(&mut writer, states[2].clone(), 1);
    drop(writer);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

#[test]
fn commits_write_into_the_logs_room_and_closing_gives_it_back() {
    let temp = TempDir::new("room");
    let store = temp.store();
    let log_size = || fs::metadata(log_path(&store, "s")).expect("meta").len();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let created = log_size();
    assert_eq!(created, writer.log_len() + format::LOG_ROOM, "the creation writes the first room");
    let mut expected = commit_steps(&mut writer, initial("s"), 3);
    assert_eq!(log_size(), created, "a commit that fits leaves the file's size as it was");
    assert_eq!(store.read("s").expect("read while open"), Some(expected.clone()));
    // Commit until the room is refilled: the file grows a whole room at a time.
    while log_size() == created {
        expected = commit_steps(&mut writer, expected, 1);
    }
    assert_eq!(log_size(), writer.log_len() + format::LOG_ROOM, "a whole room follows the record that refilled it");
    drop(writer);
    assert_eq!(log_size(), fs::read(log_path(&store, "s")).expect("log").len() as u64);
    let (state, writer) = store.open_writer("s").expect("reopen");
    assert_eq!(state, expected);
    assert_eq!(log_size(), writer.log_len(), "a closed session's log has no room");
}

#[test]
fn whole_steps_after_the_seal_load_and_are_sealed_on_open() {
    let temp = TempDir::new("unsealed");
    let store = temp.store();
    let (states, _) = session_with_steps(&store, 2);
    let seal_before = fs::read(runtime_file(&store, "s", SEAL_FILE)).expect("seal");
    append_keyed(&store, &[step(3, "synced, not sealed")]);
    let mut expected = states[2].clone();
    expected.apply(&step(3, "synced, not sealed"));

    assert_eq!(store.read("s").expect("read"), Some(expected.clone()));
    assert_eq!(fs::read(runtime_file(&store, "s", SEAL_FILE)).expect("seal"), seal_before, "a read wrote");
    let (state, writer) = store.open_writer("s").expect("open");
    assert_eq!(state, expected);
    drop(writer);
    assert_eq!(seal_of(&store).seq, 3);

    // Several whole steps after the seal load too: their seals never reached the disk.
    append_keyed(&store, &[step(4, "a"), step(5, "b")]);
    expected.apply(&step(4, "a"));
    expected.apply(&step(5, "b"));
    drop(assert_loads(&store, &expected));
    assert_eq!(seal_of(&store).seq, 5);

    // A whole record that is not the next step is not what any crash leaves.
    append_keyed(&store, &[step(6, "c"), step(8, "e")]);
    assert_refused(&store, "after the sealed step, holds step 8 where step 7 was expected");
}

/// A session whose seal lags behind its log, as after a power loss: three steps, the
/// seal as it was after the first, then two more whole steps; the log's length after
/// each step.
fn session_with_a_lagging_seal(store: &FsStore) -> (Vec<SessionState>, Vec<usize>) {
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let mut states = vec![initial("s")];
    let mut ends = vec![writer.log_len() as usize];
    let mut durable_seal = Vec::new();
    for count in 1..=3 {
        states.push(commit_steps(&mut writer, states.last().cloned().expect("a state"), 1));
        ends.push(writer.log_len() as usize);
        if count == 1 {
            durable_seal = fs::read(runtime_file(store, "s", SEAL_FILE)).expect("seal");
        }
    }
    drop(writer);
    fs::write(runtime_file(store, "s", SEAL_FILE), durable_seal).expect("seal");
    assert_eq!(seal_of(store).seq, 1);
    (states, ends)
}

#[test]
fn several_unsealed_steps_then_a_torn_one_load_and_the_torn_one_is_cut() {
    let temp = TempDir::new("lagging");
    let store = temp.store();
    let (states, ends) = session_with_a_lagging_seal(&store);
    let record = record_of(&step(4, "torn by the crash"));
    append_bytes(&log_path(&store, "s"), &record[..record.len() - 3]);

    let mut writer = assert_loads(&store, &states[3]);
    assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len() as usize, ends[3]);
    assert_eq!(seal_of(&store).seq, 3, "the open seals the steps it accepted");
    let expected = commit_steps(&mut writer, states[3].clone(), 1);
    drop(writer);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

fn copy_folder(from: &Path, to: &Path) {
    fs::create_dir(to).expect("folder");
    for entry in fs::read_dir(from).expect("read folder") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// A session folder moved aside and put back from a copy (a restore) while a writer is
/// open: the writer's handles follow the folder that was moved, so its next commit would
/// land there, where nothing reads it. It is refused instead, and the session at the path
/// is as the copy left it.
#[test]
fn a_writer_whose_session_folder_was_replaced_commits_nothing() {
    let temp = TempDir::new("replaced");
    let store = temp.store();
    let (states, _) = session_with_steps(&store, 2);
    let mut writer = store.open_writer("s").map(|(_, writer)| writer);
    let writer = writer.as_mut().expect("open");
    let folder = store.session_dir("s").expect("dir");
    let aside = folder.with_file_name("s-moved-aside");
    fs::rename(&folder, &aside).expect("move aside");
    copy_folder(&aside, &folder);
    fs::remove_file(folder.join(RUNTIME_DIR).join("lock")).expect("the copy's lock goes");

    let refused = writer.commit(&step(3, "into the folder that was moved"));
    assert!(matches!(&refused, Err(StoreError::Conflict { id, expected: 2, found: 2 }) if id == "s"), "{refused:?}");
    assert_eq!(store.read("s").expect("read"), Some(states[2].clone()));
    let aside_log = fs::read(aside.join(RUNTIME_DIR).join(LOG_FILE)).expect("log");
    assert_eq!(aside_log, fs::read(log_path(&store, "s")).expect("log"), "nothing was written aside");
}

/// A power loss during an append into the room can land the record's later pages and
/// not its first: the header reads as zeros with the payload's bytes after it. That
/// append was never acknowledged, so it is cut like any torn one, not refused.
#[test]
fn an_append_whose_first_sector_never_landed_is_cut_on_open() {
    let temp = TempDir::new("headless");
    let store = temp.store();
    let (states, ends) = session_with_a_lagging_seal(&store);
    let mut record = record_of(&step(4, &"a long reason that spills into the next sector ".repeat(30)));
    let sector = 512 - ends[3] % 512;
    assert!(record.len() > sector + 64, "the record reaches past its first sector");
    record[..sector].fill(0);
    record.extend_from_slice(&[0; 300]);
    append_bytes(&log_path(&store, "s"), &record);

    assert_eq!(store.read("s").expect("read"), Some(states[3].clone()));
    let mut writer = assert_loads(&store, &states[3]);
    assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len() as usize, ends[3], "the torn append is cut");
    assert_eq!(seal_of(&store).seq, 3);
    let expected = commit_steps(&mut writer, states[3].clone(), 1);
    drop(writer);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

#[test]
fn a_damaged_record_in_the_unsealed_tail_is_refused() {
    let temp = TempDir::new("lagging-damage");
    let store = temp.store();
    let (_, ends) = session_with_a_lagging_seal(&store);
    let pristine = fs::read(log_path(&store, "s")).expect("log");

    // The first unsealed record's payload, the last record's payload, a record header.
    for (at, start) in [
        (ends[1] + RECORD_HEADER_BYTES + 2, ends[1]),
        (ends[2] + RECORD_HEADER_BYTES + 5, ends[2]),
        (ends[2] + 1, ends[2]),
    ] {
        flip_bit(&log_path(&store, "s"), at);
        let needle = if at < start + RECORD_HEADER_BYTES {
            format!("at byte {start}, after the last whole step, have a damaged record header")
        } else {
            format!("the complete record at byte {start}, after the last whole step, fails its checksum")
        };
        assert_refused(&store, &needle);
        fs::write(log_path(&store, "s"), &pristine).expect("restore");
    }
    // Cut behind the lagging seal: nothing a crash leaves.
    fs::write(log_path(&store, "s"), &pristine[..ends[1] - 1]).expect("cut");
    assert_refused(&store, &format!("but the seal says {} bytes through step 1: it was cut short", ends[1]));
}

#[test]
fn a_torn_seal_slot_leaves_the_other_one_vouching() {
    let temp = TempDir::new("seal-slots");
    let store = temp.store();
    let (states, _) = session_with_steps(&store, 3);
    let seal_path = runtime_file(&store, "s", SEAL_FILE);
    let pristine = fs::read(&seal_path).expect("seal");
    let (_, newest, _) = Seal::decode_file(&pristine, store.seal_keys()).expect("seal");
    let SealSource::Slot(newest) = newest else { panic!("a fresh session's seal has slots") };

    // The newest slot half overwritten (a write the crash cut short): the older one vouches
    // for step 2 and the whole step 3 after it still loads.
    flip_bit(&seal_path, newest * SEAL_SLOT_BYTES + 20);
    assert_eq!(seal_of(&store).seq, 2);
    let writer = assert_loads(&store, &states[3]);
    drop(writer);
    assert_eq!(seal_of(&store).seq, 3);

    // Neither slot whole, or a seal of the wrong size: nothing vouches.
    fs::write(&seal_path, vec![0x5a; SEAL_FILE_BYTES]).expect("garbage");
    assert_refused(&store, "the seal is unreadable (neither of its two slots holds a whole seal)");
    fs::write(&seal_path, &pristine[..SEAL_SLOT_BYTES]).expect("cut");
    assert_refused(&store, "the seal is unreadable (512 bytes where 1024 were expected)");
    fs::write(&seal_path, vec![0; SEAL_FILE_BYTES]).expect("zeros");
    assert_refused(&store, "the seal is unreadable");
    // A huge (sparse) seal is refused without being read whole.
    fs::write(&seal_path, &pristine).expect("restore");
    fs::OpenOptions::new().write(true).open(&seal_path).and_then(|file| file.set_len(1 << 40)).expect("sparse");
    assert_refused(&store, "the seal is unreadable (4097 bytes where 1024 were expected)");
}

/// The seal an earlier build wrote after every commit: JSON, hex digests, in this order.
fn legacy_seal(generation: u64, seq: u64, log: &[u8], checkpoint: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "generation": generation,
        "seq": seq,
        "log_len": log.len(),
        "log_sha256": hex(&sha256(log)),
        "checkpoint_sha256": hex(&sha256(checkpoint)),
    }))
    .expect("json")
}

/// Rewrites session `s` into an earlier build's unkeyed format, through `deltas`: an
/// `AMXLOG1` log of MAC-less records after its snapshot, sealed by `seal` (made from the
/// log and snapshot bytes) — what an old build left, and what a downgrade forges.
fn rewrite_unkeyed(store: &FsStore, deltas: &[Delta], seal: impl Fn(&[u8], &[u8]) -> Vec<u8>) -> Vec<u8> {
    let checkpoint = fs::read(runtime_file(store, "s", CHECKPOINT_FILE)).expect("checkpoint");
    let snapshot: serde_json::Value = serde_json::from_slice(&checkpoint).expect("snapshot");
    let generation = snapshot["generation"].as_u64().expect("generation");
    let base_seq = snapshot["seq"].as_u64().expect("seq");
    let mut log = LogHeader { generation, base_seq, keyed: false, genesis: false }.encode();
    for delta in deltas {
        log.extend(encode_record(&serde_json::to_vec(delta).expect("json")).expect("record"));
    }
    fs::write(log_path(store, "s"), &log).expect("log");
    fs::write(runtime_file(store, "s", SEAL_FILE), seal(&log, &checkpoint)).expect("seal");
    log
}

/// An earlier build's slotted seal (`AMXSEAL2`, no key) over `log` and `checkpoint`.
fn unkeyed_slots(generation: u64, seq: u64) -> impl Fn(&[u8], &[u8]) -> Vec<u8> {
    move |log, checkpoint| {
        let seal = Seal {
            generation,
            seq,
            log_len: log.len() as u64,
            log_sha256: sha256(log),
            checkpoint_sha256: sha256(checkpoint),
        };
        let mut file = vec![0u8; SEAL_FILE_BYTES];
        file[..SEAL_SLOT_BYTES].copy_from_slice(&seal.encode_unkeyed_slot());
        file
    }
}

/// Asserts a load of `s` is refused as sealed without the key (what a reseal adopts),
/// naming the session and no command of the CLI's, and changes nothing.
fn assert_refused_unkeyed(store: &FsStore) {
    let before = snapshot_of_files(store);
    for result in [store.read("s").map(|_| ()), store.open_writer("s").map(|_| ())] {
        let Err(error) = result else { panic!("a session sealed without the key loaded") };
        let message = error.to_string();
        assert!(matches!(&error, StoreError::Unkeyed { id } if id == "s"), "{message}");
        assert!(message.contains("session `s`"), "{message}");
        assert!(message.contains("without the runner's seal key"), "{message}");
        assert!(!message.contains("--reseal"), "{message}");
    }
    assert_eq!(snapshot_of_files(store), before, "a refused load changed the disk");
}

#[test]
fn a_step_appended_and_resealed_the_old_unkeyed_way_is_refused_as_tampered() {
    let temp = TempDir::new("forged-old-seal");
    let store = temp.store();
    session_with_steps(&store, 2);
    let original = [step(1, "message 1"), step(2, "message 2")];
    // The forger keeps the two real steps, appends a third (say, one widening a
    // decision's approvers) and recomputes the seal as the store used to: no key needed.
    let forged = step(3, "approvers: [\"mallory\"]");
    let mut steps = original.to_vec();
    steps.push(forged.clone());
    rewrite_unkeyed(&store, &steps, unkeyed_slots(1, 3));
    assert_refused_unkeyed(&store);
    // With the earlier JSON seal instead of slots: the same.
    rewrite_unkeyed(&store, &steps, |log, checkpoint| legacy_seal(0, 3, log, checkpoint));
    assert_refused_unkeyed(&store);

    // Appended to the keyed log itself, with a MAC the forger can make (under a key of
    // their own), and the seal slot recomputed under that key: refused as tampered.
    let temp = TempDir::new("forged-keyed");
    let store = temp.store();
    let (_, ends) = session_with_steps(&store, 2);
    let forger = FsStore::new(store.dir.clone(), SealKeys::generate().expect("key"));
    let log = fs::read(log_path(&store, "s")).expect("log");
    let with_forged = [log.clone(), keyed_records(&forger, &log, std::slice::from_ref(&forged))].concat();
    fs::write(log_path(&store, "s"), &with_forged).expect("append");
    // Left after the seal, as a step a power loss left unsealed: its MAC fails.
    assert_refused(&store, &format!("the step log's record at byte {}, after the sealed step, fails its MAC", ends[2]));
    // Sealed by the forger: the slot's key is not the runner's.
    let mut seal = seal_of(&store);
    seal.seq = 3;
    seal.log_len = with_forged.len() as u64;
    seal.log_sha256 = sha256(&with_forged);
    fs::write(runtime_file(&store, "s", SEAL_FILE), seal.encode_file(forger.seal_keys())).expect("seal");
    assert_refused(&store, "neither the current seal key nor a previous one");
    // A slot claiming the runner's key id with a MAC made under another key: refused.
    let mut slots = seal.encode_file(store.seal_keys());
    slots[..SEAL_SLOT_BYTES].copy_from_slice(&{
        let mut slot = seal.encode_slot(forger.seal_keys());
        let theirs = seal.encode_slot(store.seal_keys());
        slot[96..104].copy_from_slice(&theirs[96..104]);
        let crc = crc32(&slot[..136]);
        slot[136..140].copy_from_slice(&crc.to_le_bytes());
        slot
    });
    fs::write(runtime_file(&store, "s", SEAL_FILE), &slots).expect("seal");
    assert_refused(&store, "fails its MAC");
}

#[test]
fn a_keyed_session_rewritten_into_the_old_format_is_refused_unless_explicitly_resealed() {
    let temp = TempDir::new("downgrade");
    let store = temp.store();
    let (states, _) = session_with_steps(&store, 2);
    let steps = [step(1, "message 1"), step(2, "message 2")];
    rewrite_unkeyed(&store, &steps, unkeyed_slots(1, 2));
    assert_refused_unkeyed(&store);
    // Only a store told to adopt unkeyed sessions loads it (and would reseal it).
    let adopting = temp.store().adopting_unkeyed_sessions();
    assert_eq!(adopting.read("s").expect("adopted read"), Some(states[2].clone()));
    assert_refused_unkeyed(&store);
}

#[test]
fn an_earlier_builds_session_loads_once_resealed_and_then_is_keyed() {
    let temp = TempDir::new("legacy");
    let store = temp.store();
    let (states, ends) = session_with_steps(&store, 3);
    let steps = [step(1, "message 1"), step(2, "message 2"), step(3, "message 3")];
    for seal in [0, 1] {
        // Sealed through step 2 by an earlier build (JSON seal, then slots), with the
        // whole step 3 after it: that build died before sealing it.
        if seal == 0 {
            rewrite_unkeyed(&store, &steps, |log, checkpoint| {
                let sealed = &log[..log.len() - (ends[3] - ends[2]) + RECORD_TAG_BYTES];
                legacy_seal(1, 2, sealed, checkpoint)
            });
        } else {
            rewrite_unkeyed(&store, &steps, |log, checkpoint| {
                unkeyed_slots(1, 2)(&log[..log.len() - (ends[3] - ends[2]) + RECORD_TAG_BYTES], checkpoint)
            });
        }
        assert_refused_unkeyed(&store);
        let adopting = temp.store().adopting_unkeyed_sessions();
        assert_eq!(adopting.read("s").expect("adopted read"), Some(states[3].clone()));
        assert_eq!(adopting.reseal("s").expect("reseal"), 3);
        // Resealed: a keyed log and seal, which the plain store loads and extends.
        let log = fs::read(log_path(&store, "s")).expect("log");
        assert_eq!(&log[..8], b"AMXLOG2\0");
        assert_eq!(&fs::read(runtime_file(&store, "s", SEAL_FILE)).expect("seal")[..8], b"AMXSEAL3");
        let mut writer = assert_loads(&store, &states[3]);
        let extended = commit_steps(&mut writer, states[3].clone(), 1);
        drop(writer);
        assert_eq!(store.read("s").expect("read"), Some(extended));
        // Back to three steps for the next round: a fresh session.
        store.remove("s").expect("remove");
        session_with_steps(&store, 3);
    }

    // Its damage is still damage, adopted or not.
    rewrite_unkeyed(&store, &steps, unkeyed_slots(1, 3));
    let log = fs::read(log_path(&store, "s")).expect("log");
    fs::write(log_path(&store, "s"), &log[..log.len() - 5]).expect("cut");
    let adopting = temp.store().adopting_unkeyed_sessions();
    let error = adopting.read("s").expect_err("a cut log");
    assert!(error.to_string().contains("cut short"), "{error}");
    fs::write(runtime_file(&store, "s", SEAL_FILE), b"{\"generation\":0}").expect("legacy seal");
    let error = adopting.read("s").expect_err("a broken seal");
    assert!(error.to_string().contains("the seal is unreadable"), "{error}");
}

#[test]
fn a_rotated_key_still_loads_sessions_of_the_previous_key_and_reseals_them_under_the_new() {
    let temp = TempDir::new("rotation");
    let old_store = temp.store();
    let (states, _) = session_with_steps(&old_store, 2);
    // A power loss left step 3 unsealed, written under the old key.
    append_keyed(&old_store, &[step(3, "unsealed")]);
    let mut expected = states[2].clone();
    expected.apply(&step(3, "unsealed"));

    let new_keys = SealKeys::generate().expect("key");
    let rotated = FsStore::new(old_store.dir.clone(), new_keys.with_previous(old_store.seal_keys()));
    let only_new = FsStore::new(old_store.dir.clone(), new_keys.clone());
    // Before the reseal only a store that still lists the old key accepts the session.
    assert!(only_new.read("s").expect_err("unknown key").to_string().contains("neither the current seal key"));
    assert_eq!(rotated.read("s").expect("read"), Some(expected.clone()));
    // Opening it for writing reseals it under the new key; then the old key may go.
    let mut writer = rotated.open_writer("s").expect("open").1;
    let expected = commit_steps(&mut writer, expected, 1);
    drop(writer);
    assert_eq!(only_new.read("s").expect("read under the new key alone"), Some(expected.clone()));
    let seal = fs::read(runtime_file(&only_new, "s", SEAL_FILE)).expect("seal");
    let new_id = new_keys.current_key_id();
    assert!(seal.windows(8).any(|window| window == new_id.as_slice()), "the seal names the new key");
    let error = old_store.read("s").expect_err("the old key alone no longer vouches");
    assert!(error.to_string().contains("session `s`"), "{error}");
    assert!(error.to_string().contains("neither the current seal key"), "{error}");
}

#[test]
fn a_commit_makes_one_sync() {
    let temp = TempDir::new("one-sync");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    assert_eq!(writer.faults.syncs, 1, "the creation's one sync");
    let expected = commit_steps(&mut writer, initial("s"), 10);
    assert_eq!(writer.faults.syncs, 1 + 10, "one fdatasync per commit");
    // A compaction syncs the seal, then stages and renames three files.
    writer.compact().expect("compact");
    assert_eq!(writer.faults.syncs, 1 + 10 + 1 + 3 * 2);
    drop(writer);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

#[test]
fn creating_a_session_makes_one_sync() {
    let temp = TempDir::new("create-one-sync");
    let store = temp.store();
    // An id with folders in it: the folders made on the way cost no sync of their own.
    for id in ["s", "team/a/b"] {
        let writer = store.create_writer(&initial(id)).expect("create");
        assert_eq!(writer.faults.syncs, 1, "{id}: one sync makes the new session durable");
    }
    assert_eq!(store.list().expect("list"), ["s", "team/a/b"]);
}

/// Creates `s` with a crash injected at its `point`-th fault point, then checks the crash
/// left no session (absent from `list`, missing to `open`, and creatable again) or a
/// whole one (listed, loading as created, taking commits). `None` once the creation
/// passed every point.
fn crash_create_once(point: usize) -> Option<&'static str> {
    let temp = TempDir::new("crash-create");
    let store = temp.store();
    let mut faults = Faults { crash_at: Some(point), ..Faults::default() };
    let created = store.create_writer_with(&initial("s"), &mut faults);
    let Some(name) = faults.crashed_at else {
        drop(created.expect("no crash injected"));
        assert_eq!(store.read("s").expect("read"), Some(initial("s")));
        return None;
    };
    assert!(created.is_err(), "a crash at `{name}` reported success");
    let listed = store.list().unwrap_or_else(|error| panic!("list after a crash at `{name}`: {error}"));
    let read = store.read("s").unwrap_or_else(|error| panic!("read after a crash at `{name}`: {error}"));
    let start = match read {
        Some(state) => {
            assert_eq!(state, initial("s"), "crash at `{name}`: a half session");
            assert_eq!(listed, ["s"], "crash at `{name}`");
            let (opened, writer) = store.open_writer("s").expect("open after the crash");
            assert_eq!(opened, state, "crash at `{name}`: open and read disagree");
            writer
        }
        None => {
            assert!(listed.is_empty(), "crash at `{name}` listed {listed:?}");
            let missing = store.open_writer("s").expect_err("no session to open");
            assert!(matches!(missing, StoreError::Missing(_)), "crash at `{name}`: {missing}");
            store.create_writer(&initial("s")).unwrap_or_else(|error| panic!("create after `{name}`: {error}"))
        }
    };
    let mut writer = start;
    let next = commit_steps(&mut writer, initial("s"), 2);
    drop(writer);
    drop(store.open_writer("s").expect("open"));
    assert!(staging_leftovers(&store).is_empty(), "crash at `{name}` left {:?}", staging_leftovers(&store));
    assert_eq!(store.read("s").expect("read"), Some(next));
    Some(name)
}

#[test]
fn a_crash_at_every_point_of_a_creation_leaves_no_session_or_a_whole_one() {
    let points: Vec<&str> = (0..).map_while(crash_create_once).collect();
    assert_eq!(points, ["mid genesis", "synced"]);
}

#[test]
fn a_truncated_log_is_refused() {
    let temp = TempDir::new("truncated");
    let store = temp.store();
    let (_, ends) = session_with_steps(&store, 3);
    let pristine = fs::read(log_path(&store, "s")).expect("log");

    fs::write(log_path(&store, "s"), &pristine[..5]).expect("write");
    assert_refused(&store, "shorter than its header");
    // Cut exactly at a record boundary: every frame is intact, only the seal knows.
    fs::write(log_path(&store, "s"), &pristine[..ends[2]]).expect("write");
    assert_refused(
        &store,
        &format!("the step log is {} bytes but the seal says {} bytes through step 3", ends[2], ends[3]),
    );
    fs::write(log_path(&store, "s"), &pristine[..LOG_HEADER_BYTES]).expect("write");
    assert_refused(&store, "cut short");
}

#[test]
fn a_deleted_log_seal_or_snapshot_is_refused() {
    let temp = TempDir::new("deleted");
    let store = temp.store();
    let (_, ends) = session_with_steps(&store, 2);
    let saved: Vec<(String, Vec<u8>)> = snapshot_of_files(&store);
    let restore = || {
        for (name, bytes) in &saved {
            fs::write(runtime_file(&store, "s", name), bytes).expect("restore");
        }
    };

    fs::remove_file(log_path(&store, "s")).expect("remove");
    assert_refused(&store, &format!("the step log is missing; the seal says it held {} bytes through step 2", ends[2]));
    restore();
    fs::remove_file(runtime_file(&store, "s", SEAL_FILE)).expect("remove");
    assert_refused(&store, "the seal (checkpoints/seal) is missing");
    restore();
    fs::remove_file(runtime_file(&store, "s", CHECKPOINT_FILE)).expect("remove");
    assert_refused(&store, "checkpoint.json is missing");
    restore();
    assert!(store.read("s").expect("restored").is_some());
}

#[test]
fn a_flipped_bit_in_any_complete_record_is_refused() {
    let temp = TempDir::new("flip");
    let store = temp.store();
    let (_, ends) = session_with_steps(&store, 3);
    let pristine = fs::read(log_path(&store, "s")).expect("log");

    // The last complete record: its payload, then its length field.
    for at in [ends[2] + RECORD_HEADER_BYTES + 3, ends[2]] {
        flip_bit(&log_path(&store, "s"), at);
        assert_refused(&store, "the step log's record at byte");
        fs::write(log_path(&store, "s"), &pristine).expect("restore");
    }
    flip_bit(&log_path(&store, "s"), ends[2] + RECORD_HEADER_BYTES + 3);
    assert_refused(&store, &format!("record at byte {} (step 3) fails its checksum", ends[2]));
    fs::write(log_path(&store, "s"), &pristine).expect("restore");

    // An earlier record, and the log's own header.
    flip_bit(&log_path(&store, "s"), ends[0] + RECORD_HEADER_BYTES + 1);
    assert_refused(&store, &format!("record at byte {} (step 1) fails its checksum", ends[0]));
    fs::write(log_path(&store, "s"), &pristine).expect("restore");
    flip_bit(&log_path(&store, "s"), 10);
    assert_refused(&store, "the step log has a damaged header");
    fs::write(log_path(&store, "s"), &pristine).expect("restore");
    assert!(store.read("s").expect("restored").is_some());
}

#[test]
fn a_whole_unsealed_record_that_fails_its_checksum_is_refused() {
    let temp = TempDir::new("unsealed-flip");
    let store = temp.store();
    let (_, ends) = session_with_steps(&store, 1);
    let mut record = record_of(&step(2, "complete but damaged"));
    let last = record.len() - 1;
    record[last] ^= 0x01;
    append_bytes(&log_path(&store, "s"), &record);
    assert_refused(
        &store,
        &format!("the complete record at byte {}, after the last whole step, fails its checksum", ends[1]),
    );
}

#[test]
fn a_damaged_or_foreign_snapshot_is_refused() {
    let temp = TempDir::new("checkpoint");
    let store = temp.store();
    session_with_steps(&store, 1);
    let checkpoint = runtime_file(&store, "s", CHECKPOINT_FILE);
    let pristine = fs::read(&checkpoint).expect("checkpoint");

    fs::write(&checkpoint, &pristine[..pristine.len() / 2]).expect("truncate");
    assert_refused(&store, "checkpoint.json is not a valid snapshot");
    // Still valid JSON, but not what was sealed.
    let edited = String::from_utf8(pristine.clone()).expect("utf-8").replace("\"w\"", "\"x\"");
    fs::write(&checkpoint, edited).expect("edit");
    assert_refused(&store, "checkpoint.json does not match the seal's digest");
    for garbage in [&b"\xff\x00garbage"[..], b"{}", b""] {
        fs::write(&checkpoint, garbage).expect("write");
        assert_refused(&store, "checkpoint.json is not a valid snapshot");
    }
}

#[test]
fn a_seq_gap_under_a_matching_seal_is_refused() {
    let temp = TempDir::new("gap");
    let store = temp.store();
    session_with_steps(&store, 0);
    let mut log = fs::read(log_path(&store, "s")).expect("log");
    log.extend(keyed_records(&store, &log.clone(), &[step(1, "a"), step(3, "c")]));
    fs::write(log_path(&store, "s"), &log).expect("write");
    // A seal that vouches for exactly these bytes: only the seq check can catch it.
    let mut seal = seal_of(&store);
    seal.seq = 3;
    seal.log_len = log.len() as u64;
    seal.log_sha256 = sha256(&log);
    fs::write(runtime_file(&store, "s", SEAL_FILE), seal.encode_file(store.seal_keys())).expect("seal");
    assert_refused(&store, "holds step 3 where step 2 was expected");
}

#[test]
fn repair_keeps_the_longest_verified_prefix_and_says_what_it_dropped() {
    let temp = TempDir::new("repair");
    let store = temp.store();
    let (states, ends) = session_with_steps(&store, 4);
    assert_eq!(store.repair("s").expect("repair"), RepairOutcome::Healthy { seq: 4 });

    flip_bit(&log_path(&store, "s"), ends[1] + RECORD_HEADER_BYTES + 2);
    assert!(matches!(store.read("s"), Err(StoreError::Damaged { .. })));
    let outcome = store.repair("s").expect("repair");
    assert_eq!(
        outcome,
        RepairOutcome::Repaired { kept_through: 1, dropped_steps: Some(3), dropped_bytes: (ends[4] - ends[1]) as u64 }
    );
    assert_eq!(store.read("s").expect("repaired"), Some(states[1].clone()));
    let (state, mut writer) = store.open_writer("s").expect("open");
    assert_eq!(state, states[1]);
    commit_steps(&mut writer, state, 2);
    drop(writer);

    // A truncated log keeps what is left of it.
    let log = fs::read(log_path(&store, "s")).expect("log");
    fs::write(log_path(&store, "s"), &log[..log.len() - 3]).expect("truncate");
    let outcome = store.repair("s").expect("repair");
    assert!(matches!(outcome, RepairOutcome::Repaired { kept_through: 2, dropped_steps: Some(1), .. }), "{outcome:?}");

    // A deleted log keeps the snapshot.
    fs::remove_file(log_path(&store, "s")).expect("remove");
    let outcome = store.repair("s").expect("repair");
    assert!(matches!(outcome, RepairOutcome::Repaired { kept_through: 0, dropped_steps: Some(2), .. }), "{outcome:?}");
    assert_eq!(store.read("s").expect("repaired"), Some(states[0].clone()));
}

#[test]
fn repair_never_keeps_a_snapshot_or_a_step_the_key_does_not_vouch_for() {
    let temp = TempDir::new("repair-forged");
    let store = temp.store();
    let (states, ends) = session_with_steps(&store, 2);
    let pristine = snapshot_of_files(&store);

    // A step appended under someone else's key: the repair drops it.
    let forger = FsStore::new(store.dir.clone(), SealKeys::generate().expect("key"));
    let log = fs::read(log_path(&store, "s")).expect("log");
    let forged = keyed_records(&forger, &log, &[step(3, "forged")]);
    append_bytes(&log_path(&store, "s"), &forged);
    let outcome = store.repair("s").expect("repair");
    assert_eq!(
        outcome,
        RepairOutcome::Repaired { kept_through: 2, dropped_steps: Some(0), dropped_bytes: forged.len() as u64 }
    );
    assert_eq!(store.read("s").expect("repaired"), Some(states[2].clone()));
    assert_eq!(fs::metadata(log_path(&store, "s")).expect("log").len() as usize, ends[2]);

    // A rewritten snapshot no keyed seal vouches for: refused, nothing changed.
    let checkpoint = runtime_file(&store, "s", CHECKPOINT_FILE);
    let forged_snapshot = fs::read_to_string(&checkpoint).expect("checkpoint").replace("\"w\"", "\"x\"");
    fs::write(&checkpoint, forged_snapshot).expect("forge");
    let before = snapshot_of_files(&store);
    let refused = store.repair("s").expect_err("a forged snapshot");
    assert!(refused.to_string().contains("no seal made under the seal key vouches for checkpoint.json"), "{refused}");
    assert_eq!(snapshot_of_files(&store), before);

    // A session rewritten into the unkeyed format: --repair does not adopt it.
    for (name, bytes) in &pristine {
        fs::write(runtime_file(&store, "s", name), bytes).expect("restore");
    }
    rewrite_unkeyed(&store, &[step(1, "message 1"), step(2, "message 2"), step(3, "forged")], unkeyed_slots(0, 3));
    let refused = store.repair("s").expect_err("an unkeyed session");
    assert!(matches!(&refused, StoreError::Unkeyed { id } if id == "s"), "{refused}");
}

#[test]
fn repair_refuses_a_damaged_snapshot_and_a_busy_session() {
    let temp = TempDir::new("repair-refused");
    let store = temp.store();
    session_with_steps(&store, 1);
    let writer = store.open_writer("s").expect("open");
    assert!(matches!(store.repair("s"), Err(StoreError::Busy(_))));
    drop(writer);
    fs::write(runtime_file(&store, "s", CHECKPOINT_FILE), b"{\"generation\":").expect("write");
    let before = snapshot_of_files(&store);
    let refused = store.repair("s").expect_err("no verified state");
    assert!(refused.to_string().contains("there is no verified state to keep"), "{refused}");
    assert_eq!(snapshot_of_files(&store), before);
    assert!(matches!(store.repair("nope"), Err(StoreError::Missing(_))));
}

#[cfg(unix)]
#[test]
fn the_store_never_follows_links_in_its_own_folder() {
    use std::os::unix::fs::symlink;
    let temp = TempDir::new("links");
    let store = temp.store();
    session_with_steps(&store, 1);
    let elsewhere = temp.0.join("elsewhere");
    fs::create_dir_all(&elsewhere).expect("dir");
    fs::write(elsewhere.join("victim"), b"precious").expect("victim");

    // The log replaced by a link to a file elsewhere: refused, the file untouched.
    let log = fs::read(log_path(&store, "s")).expect("log");
    fs::remove_file(log_path(&store, "s")).expect("remove");
    symlink(elsewhere.join("victim"), log_path(&store, "s")).expect("link");
    for result in [store.read("s").map(|_| ()), store.open_writer("s").map(|_| ())] {
        let error = result.expect_err("a linked log");
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
    }
    assert!(store.repair("s").is_err());
    assert_eq!(fs::read(elsewhere.join("victim")).expect("victim"), b"precious");
    fs::remove_file(log_path(&store, "s")).expect("unlink");
    fs::write(log_path(&store, "s"), log).expect("restore");

    // `checkpoints/` itself a link to a copy elsewhere: refused for reads and writes.
    let runtime = store.dir.join("s").join(RUNTIME_DIR);
    fs::rename(&runtime, elsewhere.join("checkpoints")).expect("move");
    symlink(elsewhere.join("checkpoints"), &runtime).expect("link");
    for result in [
        store.read("s").map(|_| ()),
        store.open_writer("s").map(|_| ()),
        store.create_writer(&initial("s")).map(|_| ()),
    ] {
        let error = result.expect_err("a linked runtime folder");
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_store_file_is_refused_without_hanging() {
    let temp = TempDir::new("fifo");
    let store = temp.store();
    session_with_steps(&store, 1);
    for file in [SEAL_FILE, LOG_FILE, LOCK_FILE] {
        let path = runtime_file(&store, "s", file);
        let saved = fs::read(&path).expect("file");
        fs::remove_file(&path).expect("remove");
        let made = std::process::Command::new("mkfifo").arg(&path).status().expect("mkfifo runs");
        assert!(made.success());
        let refused = store.open_writer("s").map(|_| ()).expect_err("a FIFO");
        assert!(refused.to_string().contains("is not a regular file"), "{file}: {refused}");
        if file != LOCK_FILE {
            let refused = store.read("s").expect_err("a FIFO");
            assert!(refused.to_string().contains("is not a regular file"), "{file}: {refused}");
        }
        fs::remove_file(&path).expect("remove the FIFO");
        fs::write(&path, saved).expect("restore");
    }
    assert!(store.read("s").expect("restored").is_some());
}

#[test]
fn staging_files_of_a_killed_writer_are_removed_on_open() {
    let temp = TempDir::new("staging");
    let store = temp.store();
    session_with_steps(&store, 1);
    let runtime = store.dir.join("s").join(RUNTIME_DIR);
    fs::write(runtime.join(staging_name(SEAL_FILE)), b"half a seal").expect("staging");
    fs::create_dir_all(store.dir.join("s").join(staging_name(RUNTIME_DIR))).expect("staging dir");
    assert_eq!(staging_leftovers(&store).len(), 2);
    drop(store.open_writer("s").expect("open"));
    assert!(staging_leftovers(&store).is_empty(), "{:?}", staging_leftovers(&store));
}

/// Runs `write` on a fresh three-step session with a crash injected at its `point`-th
/// fault point, then checks the session loads as the old or the new state, opens,
/// leaves no staging files, and takes two more commits. `None` once `write` passed
/// every point.
type Write = dyn Fn(&mut FsWriter, &SessionState) -> (Result<(), StoreError>, SessionState);

fn crash_once(point: usize, write: &Write) -> Option<&'static str> {
    crash_once_on(point, write, false)
}

/// [`crash_once`], on a new session (its genesis log alone, no seal yet) when `new`.
fn crash_once_on(point: usize, write: &Write, new: bool) -> Option<&'static str> {
    let temp = TempDir::new("crash");
    let store = temp.store();
    let old = if new {
        drop(store.create_writer(&initial("s")).expect("create"));
        initial("s")
    } else {
        session_with_steps(&store, 3).0[3].clone()
    };
    let (_, mut writer) = store.open_writer("s").expect("open");
    writer.faults = Faults { crash_at: Some(point), ..Faults::default() };
    let (result, new) = write(&mut writer, &old);
    let crashed_at = writer.faults.crashed_at;
    drop(writer);
    let Some(name) = crashed_at else {
        result.expect("no crash injected");
        assert_eq!(store.read("s").expect("read"), Some(new));
        return None;
    };
    assert!(result.is_err(), "a crash at `{name}` reported success");
    let read = store.read("s").unwrap_or_else(|error| panic!("crash at `{name}` (point {point}): {error}"));
    let read = read.expect("the session exists");
    assert!(read == old || read == new, "crash at `{name}` loaded seq {}", read.seq);
    let (opened, mut writer) = store.open_writer("s").expect("open after the crash");
    assert_eq!(opened, read, "crash at `{name}`: open and read disagree");
    assert!(staging_leftovers(&store).is_empty(), "crash at `{name}` left {:?}", staging_leftovers(&store));
    let next = commit_steps(&mut writer, opened, 2);
    drop(writer);
    assert_eq!(store.read("s").expect("read"), Some(next));
    Some(name)
}

#[test]
fn a_crash_at_every_write_point_of_a_commit_loads_as_old_or_new() {
    let commit = |writer: &mut FsWriter, old: &SessionState| {
        let delta = step(old.seq + 1, "the crashing step");
        let mut new = old.clone();
        new.apply(&delta);
        (writer.commit(&delta), new)
    };
    let points: Vec<&str> = (0..).map_while(|point| crash_once(point, &commit)).collect();
    assert_eq!(points, ["before append", "mid append", "appended", "mid seal"]);
}

#[test]
fn a_crash_at_every_write_point_of_a_new_sessions_first_commit_or_compaction_loads_as_old_or_new() {
    let commit = |writer: &mut FsWriter, old: &SessionState| {
        let delta = step(old.seq + 1, "the first step");
        let mut new = old.clone();
        new.apply(&delta);
        (writer.commit(&delta), new)
    };
    let points: Vec<&str> = (0..).map_while(|point| crash_once_on(point, &commit, true)).collect();
    assert_eq!(points, ["before append", "mid append", "appended", "mid seal"]);
    let compact = |writer: &mut FsWriter, old: &SessionState| (writer.compact(), old.clone());
    let points: Vec<&str> = (0..).map_while(|point| crash_once_on(point, &compact, true)).collect();
    // The first seal is written (and synced) before the snapshot.
    assert_eq!(points, ["mid seal", "staged", "renamed", "staged", "renamed", "staged", "renamed"]);
}

#[test]
fn what_a_power_loss_leaves_of_a_creation_is_no_session() {
    let temp = TempDir::new("cut-creation");
    let store = temp.store();
    let whole = {
        drop(store.create_writer(&initial("s")).expect("create"));
        fs::read(log_path(&store, "s")).expect("log")
    };
    // Folders with no log, an empty log, a torn header, zeros where the bytes never
    // landed, a header with half its genesis.
    let leftovers: [Option<Vec<u8>>; 5] = [
        None,
        Some(Vec::new()),
        Some(whole[..5].to_vec()),
        Some(vec![0; whole.len()]),
        Some(whole[..whole.len() - 7].to_vec()),
    ];
    for leftover in leftovers {
        store.remove("s").expect("remove");
        let runtime = store.dir.join("s").join(RUNTIME_DIR);
        fs::create_dir_all(&runtime).expect("folders");
        if let Some(bytes) = &leftover {
            fs::write(runtime.join(LOG_FILE), bytes).expect("leftover log");
        }
        let len = leftover.as_ref().map(Vec::len);
        assert!(store.list().expect("list").is_empty(), "{len:?}");
        assert_eq!(store.read("s").expect("read"), None, "{len:?}");
        let missing = store.open_writer("s").expect_err("nothing to open");
        assert!(matches!(missing, StoreError::Missing(_)), "{len:?}: {missing}");
        let mut writer = store.create_writer(&initial("s")).expect("created over what was left");
        let expected = commit_steps(&mut writer, initial("s"), 1);
        drop(writer);
        assert_eq!(store.read("s").expect("read"), Some(expected), "{len:?}");
    }
}

#[test]
fn a_new_sessions_log_vouches_for_itself_until_its_first_seal() {
    let temp = TempDir::new("genesis");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let expected = commit_steps(&mut writer, initial("s"), 3);
    drop(writer);
    let seal = runtime_file(&store, "s", SEAL_FILE);
    // A power loss can take the unsynced first seal, or leave it zeros: every step
    // still loads, proved by its MAC, and the open seals them again.
    for lost in [None, Some(vec![0u8; SEAL_FILE_BYTES])] {
        match &lost {
            None => fs::remove_file(&seal).expect("remove the seal"),
            Some(zeros) => fs::write(&seal, zeros).expect("zero the seal"),
        }
        assert_eq!(store.list().expect("list"), ["s"]);
        drop(assert_loads(&store, &expected));
        assert_eq!(seal_of(&store).seq, expected.seq, "sealed again on open");
    }
    // A compaction over what a power loss left of a first seal (here, before any step
    // sealed) writes the seal first, so a crash in it finds the log sealed through the
    // new snapshot.
    store.remove("s").expect("remove");
    drop(store.create_writer(&initial("s")).expect("create"));
    fs::write(&seal, vec![0u8; SEAL_FILE_BYTES]).expect("zeros for a seal");
    let (_, mut writer) = store.open_writer("s").expect("open");
    writer.faults = Faults { crash_at: Some(2), ..Faults::default() };
    assert!(writer.compact().is_err(), "the crash after the snapshot's rename");
    assert_eq!(writer.faults.crashed_at, Some("renamed"));
    drop(writer);
    drop(assert_loads(&store, &initial("s")));
    store.remove("s").expect("remove");
    let mut writer = store.create_writer(&initial("s")).expect("create");
    commit_steps(&mut writer, initial("s"), 3);
    drop(writer);
    // The genesis is the snapshot: damage there is refused, never read as no session.
    let log = log_path(&store, "s");
    flip_bit(&log, LOG_HEADER_BYTES + RECORD_HEADER_BYTES + 3);
    assert_refused(&store, "the session's snapshot, fails its checksum");
    flip_bit(&log, LOG_HEADER_BYTES + RECORD_HEADER_BYTES + 3);
    // One made under another key is forged.
    let other = TempDir::new("genesis-other");
    drop(other.store().create_writer(&initial("s")).expect("create"));
    fs::copy(log_path(&other.store(), "s"), &log).expect("foreign genesis");
    fs::remove_file(&seal).expect("remove the seal");
    assert_refused(&store, "fails its MAC");
}

#[test]
fn repair_keeps_a_new_sessions_verified_prefix() {
    let temp = TempDir::new("genesis-repair");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let mut ends = vec![writer.log_len() as usize];
    let mut states = vec![initial("s")];
    for _ in 0..3 {
        states.push(commit_steps(&mut writer, states.last().cloned().expect("a state"), 1));
        ends.push(writer.log_len() as usize);
    }
    drop(writer);
    flip_bit(&log_path(&store, "s"), ends[2] + RECORD_HEADER_BYTES + 2);
    assert_refused(&store, "fails its checksum");
    let outcome = store.repair("s").expect("repair");
    assert_eq!(
        outcome,
        RepairOutcome::Repaired { kept_through: 2, dropped_steps: Some(1), dropped_bytes: (ends[3] - ends[2]) as u64 }
    );
    drop(assert_loads(&store, &states[2]));
}

#[test]
fn a_crash_at_every_write_point_of_a_compaction_loads_the_same_state() {
    let compact = |writer: &mut FsWriter, old: &SessionState| (writer.compact(), old.clone());
    let points: Vec<&str> = (0..).map_while(|point| crash_once(point, &compact)).collect();
    // Snapshot, log and seal, each staged then renamed (the seal's sync first is no
    // point: the files are the same before and after it).
    assert_eq!(points, ["staged", "renamed", "staged", "renamed", "staged", "renamed"]);
}

#[test]
fn compaction_keeps_the_state_through_120_growing_steps() {
    let temp = TempDir::new("compaction");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let mut expected = initial("s");
    let (mut compactions, mut snapshot_bytes, mut log_bytes) = (0u64, 0u64, 0u64);
    let mut largest_log = 0;
    // Until the first compaction the log also holds the snapshot, its genesis record,
    // which compaction does not count as steps.
    let genesis = writer.log_len() - LOG_HEADER_BYTES as u64;
    for seq in 1..=120u64 {
        // Each step is 80 bytes longer than the last, so 120 steps cross the compaction
        // threshold four times; a longer walk costs fsyncs and proves nothing more.
        let text = "x".repeat((seq * 80) as usize);
        let delta = step(seq, &text);
        let log_before = writer.log_len();
        writer.commit(&delta).expect("commit");
        expected.apply(&delta);
        if writer.log_len() < log_before {
            compactions += 1;
            snapshot_bytes += writer.snapshot_len();
            log_bytes += log_before;
        }
        let record_len = record_of(&delta).len() as u64;
        let snapshot_in_log = if compactions == 0 { genesis } else { 0 };
        assert!(writer.log_len() <= writer.snapshot_len().max(MIN_COMPACTION_LOG_BYTES) + record_len + snapshot_in_log);
        largest_log = largest_log.max(writer.log_len());
    }
    assert!(compactions >= 3, "{compactions} compactions");
    // Amortised O(1): snapshots never cost more than a small multiple of what was logged.
    assert!(snapshot_bytes <= 2 * log_bytes, "{snapshot_bytes} snapshot bytes for {log_bytes} logged");
    assert!(largest_log < 2 * writer.snapshot_len().max(MIN_COMPACTION_LOG_BYTES));
    assert_eq!(writer.state(), &expected);
    drop(writer);

    assert_eq!(store.read("s").expect("read"), Some(expected.clone()));
    let (reopened, _writer) = store.open_writer("s").expect("open");
    assert_eq!(reopened, expected);
}

/// An unlocked read sees each file at a different moment of a writer's work. It reads
/// the snapshot, then the seal, then the log, so it can only meet a log that is ahead
/// of the seal (which verifies); a seal ahead of the log would read as a cut log.
#[test]
fn a_read_that_meets_the_log_ahead_of_the_seal_verifies() {
    let temp = TempDir::new("views");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let after_one = commit_steps(&mut writer, initial("s"), 1);
    let ends_at_one = writer.log_len() as usize;
    let runtime = store.dir.join("s").join(RUNTIME_DIR);
    let at_one = Files::read(&runtime).expect("files");
    let after_two = commit_steps(&mut writer, after_one.clone(), 1);
    let at_two = Files::read(&runtime).expect("files");

    let seal_behind =
        Files { checkpoint: at_one.checkpoint.clone(), seal: at_one.seal.clone(), log: at_two.log.clone() };
    let trust = verify::Trust { keys: store.seal_keys(), adopt_unkeyed: false };
    let loaded = verify::verify(&seal_behind, trust).expect("a log one step ahead verifies").expect("a session");
    assert_eq!(loaded.state, after_two);
    // A seal ahead of the log: where it vouches for step 2, the open writer's log has
    // the zeros of its room; once the writer gave the room back, the log is short.
    let seal_ahead = Files { checkpoint: at_two.checkpoint.clone(), seal: at_two.seal.clone(), log: at_one.log };
    let refused = verify::verify(&seal_ahead, trust).err().expect("a seal ahead of the log");
    assert!(
        matches!(&refused, verify::Refusal::Damage(what) if what.contains("(step 2) fails its checksum")),
        "{refused:?}"
    );
    let closed_at_one = at_two.log.as_deref().map(|log| log[..ends_at_one].to_vec());
    let seal_ahead = Files { checkpoint: at_two.checkpoint, seal: at_two.seal, log: closed_at_one };
    let refused = verify::verify(&seal_ahead, trust).err().expect("a seal ahead of the log");
    assert!(matches!(&refused, verify::Refusal::Damage(what) if what.contains("cut short")), "{refused:?}");
}

#[test]
fn a_writer_another_went_behind_leaves_that_writers_records_when_dropped() {
    let temp = TempDir::new("behind");
    let store = temp.store();
    let mut stale = store.create_writer(&initial("s")).expect("create");
    let expected = commit_steps(&mut stale, initial("s"), 1);
    let _ = stale.lock.unlock();
    // The other writer commits into the room the stale one still counts as its own.
    let (_, mut fresh) = store.open_writer("s").expect("open behind its back");
    let expected = commit_steps(&mut fresh, expected, 2);
    assert!(matches!(stale.commit(&step(2, "stale")), Err(StoreError::Conflict { .. })));
    drop(stale);
    assert_eq!(store.read("s").expect("read"), Some(expected.clone()), "the stale writer cut nothing");
    drop(fresh);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

#[test]
fn a_second_writer_is_busy() {
    let temp = TempDir::new("busy");
    let store = temp.store();
    let writer = store.create_writer(&initial("s")).expect("create");
    assert!(matches!(store.open_writer("s"), Err(StoreError::Busy(id)) if id == "s"));
    assert!(store.read("s").expect("read while locked").is_some());
    drop(writer);
    let (_, writer) = store.open_writer("s").expect("open after drop");
    assert!(matches!(store.open_writer("s"), Err(StoreError::Busy(_))));
    drop(writer);
}

#[test]
fn a_stale_writer_gets_conflict_and_writes_nothing() {
    let temp = TempDir::new("stale");
    let store = temp.store();
    let mut stale = store.create_writer(&initial("s")).expect("create");
    let expected = commit_steps(&mut stale, initial("s"), 1);

    assert!(matches!(stale.commit(&step(3, "gap")), Err(StoreError::Conflict { expected: 2, found: 1, .. })));
    assert!(matches!(stale.commit(&step(1, "again")), Err(StoreError::Conflict { .. })));

    let _ = stale.lock.unlock();
    let (state, mut fresh) = store.open_writer("s").expect("open behind its back");
    assert_eq!(state, expected);
    let expected = commit_steps(&mut fresh, expected, 1);
    let refused = stale.commit(&step(2, "stale"));
    assert!(matches!(refused, Err(StoreError::Conflict { expected: 1, found: 2, .. })), "{refused:?}");
    assert_eq!(store.read("s").expect("read"), Some(expected.clone()));

    // Same log length on both sides: the replaced snapshot still gives the stale writer away.
    drop(fresh);
    let (_, mut stale) = store.open_writer("s").expect("reopen");
    stale.compact().expect("compact");
    let _ = stale.lock.unlock();
    let (_, mut fresh) = store.open_writer("s").expect("open again");
    let expected = commit_steps(&mut fresh, expected, 1);
    fresh.compact().expect("compact");
    assert_eq!(fresh.log_len(), stale.log_len());
    assert!(matches!(stale.commit(&step(3, "stale")), Err(StoreError::Conflict { found: 3, .. })));
    assert!(matches!(stale.compact(), Err(StoreError::Conflict { .. })));
    drop(fresh);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

/// The seal's slots change in place, so the writer's check stamps its inode: a seal
/// renamed over it (by a repair, say) is noticed before the next write.
#[test]
fn a_seal_replaced_behind_the_writers_back_is_a_conflict() {
    let temp = TempDir::new("seal-replaced");
    let store = temp.store();
    let mut writer = store.create_writer(&initial("s")).expect("create");
    let expected = commit_steps(&mut writer, initial("s"), 2);
    let seal_path = runtime_file(&store, "s", SEAL_FILE);
    let copy = seal_path.with_file_name("seal-copy");
    fs::copy(&seal_path, &copy).expect("copy");
    fs::rename(&copy, &seal_path).expect("rename");
    let refused = writer.commit(&step(3, "behind its back"));
    assert!(matches!(refused, Err(StoreError::Conflict { expected: 2, found: 2, .. })), "{refused:?}");
    drop(writer);
    assert_eq!(store.read("s").expect("read"), Some(expected));
}

#[test]
fn list_returns_sorted_session_ids() {
    let temp = TempDir::new("list");
    let store = temp.store();
    assert_eq!(store.list().expect("list of a missing dir"), Vec::<String>::new());
    for id in ["b", "a~1", "a", "tenant/1"] {
        drop(store.create_writer(&initial(id)).expect("create"));
    }
    fs::create_dir_all(store.dir.join("_specs")).expect("specs");
    fs::create_dir_all(store.dir.join("empty")).expect("empty");
    fs::write(store.dir.join("stray-file"), b"x").expect("file");
    assert_eq!(store.list().expect("list"), ["a", "a~1", "b", "tenant/1"]);
}

#[test]
fn the_filesystem_store_keeps_the_store_contract() {
    let dir = TempDir::new("conformance");
    let sessions = dir.0.join("sessions");
    crate::session::conformance::run("filesystem store", &|| {
        Arc::new(FsStore::new(sessions.clone(), dir.1.clone())) as Arc<dyn SessionStore>
    });
}

/// `archmax sessions` probes each running session's lock while another process may be
/// opening it: a writer that meets a probe's instant hold waits it out instead of failing
/// as busy, and a probe is told apart from a writer.
#[test]
fn a_probes_instant_hold_on_the_lock_never_makes_a_writer_busy() {
    let temp = TempDir::new("probe");
    let store = temp.store();
    drop(store.create_writer(&initial("s")).expect("create"));
    let lock_path = runtime_file(&store, "s", LOCK_FILE);
    // A probe caught between taking the free lock and letting it go.
    let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let (held_sender, held_receiver) = held;
    let (release_sender, release_receiver) = release;
    let probe = std::thread::spawn(move || {
        let lock = files::open(&lock_path, OpenOptions::new().read(true).write(true)).expect("lock file");
        lock.try_lock().expect("the lock is free");
        held_sender.send(()).expect("signal");
        let _ = release_receiver.recv_timeout(std::time::Duration::from_millis(20));
        drop(lock);
    });
    held_receiver.recv().expect("the probe holds the lock");
    let opened = store.open_writer("s");
    drop(release_sender);
    probe.join().expect("the probe ends");
    let (_, writer) = opened.expect("the writer waits out the probe instead of failing as busy");
    // While the writer holds it, a probe says so; once it is gone, that nobody does.
    assert_eq!(store.is_held("s").expect("probe"), Some(true));
    assert!(matches!(store.open_writer("s"), Err(StoreError::Busy(_))), "a second writer is still busy");
    drop(writer);
    assert_eq!(store.is_held("s").expect("probe"), Some(false));
    assert_eq!(store.is_held("nobody").expect("probe"), None);
}

/// A local user who swaps a session's `checkpoints/` (or the session's folder) for a link
/// gets the probe refused, as reads and writes are, and no lock elsewhere is touched.
#[cfg(unix)]
#[test]
fn the_lock_probe_never_follows_a_linked_session_folder() {
    use std::os::unix::fs::symlink;
    let temp = TempDir::new("probe-links");
    let store = temp.store();
    drop(store.create_writer(&initial("s")).expect("create"));
    let elsewhere = temp.0.join("elsewhere");
    fs::create_dir_all(&elsewhere).expect("dir");
    let runtime = store.dir.join("s").join(RUNTIME_DIR);
    fs::rename(&runtime, elsewhere.join("checkpoints")).expect("move");
    symlink(elsewhere.join("checkpoints"), &runtime).expect("link");
    let refused = store.is_held("s").expect_err("a linked runtime folder");
    assert!(refused.to_string().contains("is a symbolic link"), "{refused}");
    // The lock it would have reached is free to take: the probe left it alone.
    let foreign =
        files::open(&elsewhere.join("checkpoints").join(LOCK_FILE), OpenOptions::new().read(true).write(true))
            .expect("the lock elsewhere");
    assert!(foreign.try_lock().is_ok());
    drop(foreign);

    fs::remove_file(&runtime).expect("unlink");
    fs::rename(elsewhere.join("checkpoints"), &runtime).expect("move back");
    fs::rename(store.dir.join("s"), elsewhere.join("s")).expect("move the session");
    symlink(elsewhere.join("s"), store.dir.join("s")).expect("link");
    let refused = store.is_held("s").expect_err("a linked session folder");
    assert!(refused.to_string().contains("is a symbolic link"), "{refused}");
}
