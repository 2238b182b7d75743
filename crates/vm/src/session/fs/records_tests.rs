//! The filesystem records against a writer of `sessions/`: forged, copied and
//! rotated-out record files, and record folders swapped for links.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use super::*;
use crate::session::fs::{FsStore, SealKeys};

/// A unique folder under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
        let name = format!(
            "archmax-records-{label}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        fs::create_dir_all(&path).expect("scratch folder");
        Self(path)
    }

    fn store(&self, keys: &SealKeys) -> FsStore {
        FsStore::new(self.0.join("sessions"), keys.clone())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const NOW: u64 = 1_000_000;
const KIND: RecordKind = RecordKind::Conformance;

fn keys() -> SealKeys {
    SealKeys::generate().expect("a key")
}

fn record(key: &str, value: &[u8], expires_ms: u64) -> Record {
    Record { kind: KIND, key: key.to_string(), value: value.to_vec(), expires_ms }
}

/// Where the store keeps the record `key` of `kind`.
fn record_file(store: &FsStore, kind: RecordKind, key: &str) -> PathBuf {
    store.dir.join(RECORDS_DIR).join(kind.as_str()).join(record_file_name(store.seal_keys(), kind, key))
}

/// A record file as a writer of `sessions/` would make it: the layout, then `mac`.
fn by_hand(expires_ms: u64, value: &[u8], mac: &[u8]) -> Vec<u8> {
    [&expires_ms.to_be_bytes()[..], value, mac].concat()
}

#[test]
fn a_record_file_written_by_hand_without_the_right_mac_is_not_read_and_does_not_block_a_claim() {
    let scratch = Scratch::new("forged");
    let store = scratch.store(&keys());
    let other = scratch.store(&keys());
    // The MAC another key gives the same record, at the right place.
    let other_key_mac = {
        let name = record_file_name(store.seal_keys(), KIND, "other-key");
        let bytes = encode_record(other.seal_keys(), KIND, &name, NOW + 1_000, b"admin");
        bytes[bytes.len() - 32..].to_vec()
    };
    let forgeries: [(&str, Vec<u8>); 3] =
        [("no-mac", Vec::new()), ("zero-mac", vec![0; 32]), ("other-key", other_key_mac)];
    for (key, mac) in &forgeries {
        let path = record_file(&store, KIND, key);
        fs::create_dir_all(path.parent().expect("a folder")).expect("records folder");
        fs::write(&path, by_hand(NOW + 1_000, b"admin", mac)).expect("forge");
        assert_eq!(store.read_record(KIND, key, NOW).expect("read"), None, "{key}: a forged record is not read");
    }
    for (key, _) in &forgeries {
        assert!(store.claim_record(&record(key, b"mine", NOW + 1_000), NOW).expect("claim"), "{key}: the claim wins");
        assert_eq!(store.read_record(KIND, key, NOW).expect("read").as_deref(), Some(&b"mine"[..]), "{key}");
    }
}

#[test]
fn forged_record_files_are_never_counted_as_live_and_the_sweep_removes_them() {
    let scratch = Scratch::new("forged-full");
    let store = scratch.store(&keys());
    let forged: Vec<PathBuf> =
        (0..KIND.capacity()).map(|index| record_file(&store, KIND, &format!("f{index}"))).collect();
    for path in &forged {
        fs::create_dir_all(path.parent().expect("a folder")).expect("records folder");
        fs::write(path, by_hand(NOW + 1_000, b"x", &[7; 32])).expect("forge");
    }
    // The first claim sweeps the kind (no state yet): a full kind of forgeries is empty.
    assert!(store.claim_record(&record("honest", b"y", NOW + 1_000), NOW).expect("claim is not refused as full"));
    for path in &forged {
        assert!(!path.exists(), "the sweep removed {}", path.display());
    }
}

#[test]
fn a_record_copied_to_another_keys_file_name_is_not_read() {
    let scratch = Scratch::new("copied");
    let store = scratch.store(&keys());
    assert!(store.claim_record(&record("alice", b"alice's", NOW + 1_000), NOW).expect("claim"));
    assert!(store.claim_record(&record("mallory", b"mallory's", NOW + 1_000), NOW).expect("claim"));
    let alice = fs::read(record_file(&store, KIND, "alice")).expect("alice's file");
    fs::write(record_file(&store, KIND, "mallory"), &alice).expect("copy over mallory's");
    fs::write(record_file(&store, KIND, "eve"), &alice).expect("copy to eve's");
    assert_eq!(store.read_record(KIND, "mallory", NOW).expect("read"), None);
    assert_eq!(store.read_record(KIND, "eve", NOW).expect("read"), None);
    assert!(store.claim_record(&record("eve", b"eve's", NOW + 1_000), NOW).expect("a copy does not block a claim"));
    assert_eq!(store.read_record(KIND, "alice", NOW).expect("read").as_deref(), Some(&b"alice's"[..]));
}

#[test]
fn a_record_written_under_a_rotated_out_key_reads_as_absent_but_still_holds_its_key() {
    let scratch = Scratch::new("rotated");
    let (old, new) = (keys(), keys());
    let before = scratch.store(&old);
    assert!(before.claim_record(&record("k", b"old", NOW + 1_000), NOW).expect("claim"));
    // Reads are the current key's: a sign-in made before the rotation is gone.
    for after in [scratch.store(&new.with_previous(&old)), scratch.store(&new)] {
        assert_eq!(after.read_record(KIND, "k", NOW).expect("read"), None);
    }
    // A claim looks under the previous key too: a webhook accepted just before the
    // rotation is still a replay after it, until its record expires.
    let rotated = scratch.store(&new.with_previous(&old));
    assert!(!rotated.claim_record(&record("k", b"new", NOW + 1_000), NOW).expect("claim"), "replayed after a rotation");
    assert!(rotated.claim_record(&record("k", b"new", NOW + 3_000), NOW + 1_000).expect("claim once it expired"));
    assert_eq!(rotated.read_record(KIND, "k", NOW + 1_000).expect("read").as_deref(), Some(&b"new"[..]));

    // A key no longer accepted vouches for nothing: its record blocks no claim.
    let other = scratch.store(&old);
    assert!(other.claim_record(&record("j", b"old", NOW + 1_000), NOW).expect("claim"));
    assert!(scratch.store(&new).claim_record(&record("j", b"new", NOW + 1_000), NOW).expect("the old key is gone"));

    // Forgetting a key forgets it under every accepted key.
    assert!(other.claim_record(&record("i", b"old", NOW + 1_000), NOW).expect("claim"));
    assert!(rotated.remove_record(KIND, "i").expect("remove"));
    assert!(rotated.claim_record(&record("i", b"new", NOW + 1_000), NOW).expect("claim after the removal"));
}

#[test]
fn a_sign_in_key_is_made_again_at_once_after_a_rotation() {
    // The inbox's one shared key is read under the current seal key only; if its old
    // record still held the key, the inbox could neither read nor make one until it
    // expired (days).
    let scratch = Scratch::new("rotated-inbox-key");
    let (old, new) = (keys(), keys());
    let key = Record { kind: RecordKind::InboxKey, ..record("sign-in-form", b"old", NOW + 1_000) };
    assert!(scratch.store(&old).claim_record(&key, NOW).expect("claim"));
    let rotated = scratch.store(&new.with_previous(&old));
    assert_eq!(rotated.read_record(RecordKind::InboxKey, "sign-in-form", NOW).expect("read"), None);
    let fresh = Record { value: b"new".to_vec(), ..key };
    assert!(rotated.claim_record(&fresh, NOW).expect("claim"), "made again under the new key");
    assert_eq!(
        rotated.read_record(RecordKind::InboxKey, "sign-in-form", NOW).expect("read").as_deref(),
        Some(&b"new"[..])
    );
}

#[test]
fn a_sweep_keeps_what_a_previous_key_vouches_for_until_it_expires() {
    let scratch = Scratch::new("rotated-sweep");
    let (old, new) = (keys(), keys());
    assert!(scratch.store(&old).claim_record(&record("k", b"old", NOW + 1_000), NOW).expect("claim"));
    let rotated = scratch.store(&new.with_previous(&old));
    let folder = rotated.kind_folder(KIND, false).expect("open").expect("the kind's folder");
    let kept = folder.sweep(&rotated.keys, KIND, NOW).expect("sweep");
    assert_eq!(kept.estimate, 1, "a live record under the previous key counts");
    assert!(!rotated.claim_record(&record("k", b"new", NOW + 1_000), NOW).expect("claim"), "the sweep kept it");
    let expired = folder.sweep(&rotated.keys, KIND, NOW + 1_000).expect("sweep");
    assert_eq!(expired.estimate, 0, "an expired one is removed");
    assert!(rotated.claim_record(&record("k", b"new", NOW + 3_000), NOW + 1_000).expect("claim after it expired"));
}

#[test]
fn a_record_files_name_does_not_show_its_key() {
    let scratch = Scratch::new("names");
    let store = scratch.store(&keys());
    assert!(store.claim_record(&record("visible-key", b"v", NOW + 1_000), NOW).expect("claim"));
    let folder = store.dir.join(RECORDS_DIR).join(KIND.as_str());
    let names: Vec<String> = fs::read_dir(&folder)
        .expect("the kind's folder")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(!names[0].contains("visible"), "{names:?}");
    assert!(names[0].len() == 64 && names[0].bytes().all(|byte| byte.is_ascii_hexdigit()), "{names:?}");
}

/// Every file under `folder` and its bytes.
fn contents(folder: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    for entry in fs::read_dir(folder).expect("outside folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(contents(&path));
        } else {
            found.insert(path.clone(), fs::read(&path).expect("outside file"));
        }
    }
    found
}

/// A folder outside the store holding what a sweep would delete and a claim would write
/// over: a short file, a file whose first 8 bytes are a past time, and a file under the
/// name the store keeps `key` at (with a `<kind>` folder holding the same, for a link in
/// place of `+records`).
fn outside_folder(scratch: &Scratch, store: &FsStore, key: &str) -> PathBuf {
    let outside = scratch.0.join("outside");
    let name = record_file(store, KIND, key).file_name().expect("a name").to_owned();
    for folder in [outside.clone(), outside.join(KIND.as_str())] {
        fs::create_dir_all(&folder).expect("outside folder");
        fs::write(folder.join("short"), b"abc").expect("short file");
        fs::write(folder.join("dated"), [0u8; 16]).expect("dated file");
        fs::write(folder.join(&name), b"precious, not a record").expect("named file");
    }
    outside
}

/// Swaps `real` and `link` (a link to an outside folder) back and forth, atomically,
/// `times` times, then says it is done.
fn swap_back_and_forth(real: PathBuf, link: PathBuf, times: usize, done: Arc<AtomicBool>) {
    let exchange = |from: &Path, to: &Path| {
        use std::os::unix::ffi::OsStrExt;
        let from = std::ffi::CString::new(from.as_os_str().as_bytes()).expect("a path");
        let to = std::ffi::CString::new(to.as_os_str().as_bytes()).expect("a path");
        // SAFETY: both are valid NUL-terminated paths for the duration of the call.
        let result = unsafe {
            libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_EXCHANGE)
        };
        assert_eq!(result, 0, "exchange: {}", std::io::Error::last_os_error());
    };
    for _ in 0..times {
        exchange(&real, &link);
        std::thread::yield_now();
        exchange(&real, &link);
    }
    done.store(true, Ordering::SeqCst);
}

/// Claims (each one sweeping), reads and removes records while `done` is not set.
fn use_records_until(store: &FsStore, done: &AtomicBool) -> usize {
    let mut operations = 0;
    let mut now = NOW;
    while !done.load(Ordering::SeqCst) {
        // A minute apart: every claim sweeps the kind's folder.
        now += 61_000;
        let _ = store.claim_record(&record("target", b"v", now + 1), now);
        let _ = store.read_record(KIND, "target", now);
        let _ = store.remove_record(KIND, "target");
        operations += 1;
    }
    operations
}

#[test]
fn record_folders_swapped_for_links_redirect_no_claim_read_removal_or_sweep() {
    let scratch = Scratch::new("links");
    let store = scratch.store(&keys());
    assert!(store.claim_record(&record("seed", b"s", NOW + 1), NOW).expect("claim"));
    let outside = outside_folder(&scratch, &store, "target");
    let before = contents(&outside);
    let top = store.dir.join(RECORDS_DIR);
    let kind_folder = top.join(KIND.as_str());

    // A link standing in either folder: every operation is refused, naming the folder.
    for (real, target) in [(kind_folder.clone(), outside.clone()), (top.clone(), outside.clone())] {
        let aside = scratch.0.join("aside");
        fs::rename(&real, &aside).expect("move the folder aside");
        std::os::unix::fs::symlink(&target, &real).expect("link in its place");
        let later = NOW + 120_000;
        let refusals = [
            store.claim_record(&record("target", b"v", later + 1), later).map(|_| ()),
            store.read_record(KIND, "target", later).map(|_| ()),
            store.remove_record(KIND, "target").map(|_| ()),
        ];
        for refusal in refusals {
            match refusal {
                Err(StoreError::Io { id, source }) => {
                    assert_eq!(id, format!("{RECORDS_DIR}/{}", KIND.as_str()));
                    assert!(source.to_string().contains("symbolic link"), "{source}");
                }
                other => panic!("a linked records folder is refused, got {other:?}"),
            }
        }
        fs::remove_file(&real).expect("remove the link");
        fs::rename(&aside, &real).expect("put the folder back");
        assert_eq!(contents(&outside), before, "nothing outside changed");
    }

    // The same links swapped in and out while the runner works: whatever it sees, it
    // works only inside its own folders.
    for (real, link_name) in [(kind_folder, top.join("swap")), (top, store.dir.join("swap"))] {
        std::os::unix::fs::symlink(&outside, &link_name).expect("a link to swap in");
        let done = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (real, link_name, done) = (real.clone(), link_name.clone(), done.clone());
            std::thread::spawn(move || swap_back_and_forth(real, link_name, 4_000, done))
        };
        let operations = use_records_until(&store, &done);
        swapper.join().expect("the swapper");
        assert!(operations > 0);
        assert_eq!(contents(&outside), before, "nothing outside changed while {} was swapped", real.display());
        fs::remove_file(&link_name).expect("remove the swap link");
    }
}
