//! One contract, checked against every [`SessionStore`]: the conformance suite.
//!
//! A store's own tests call [`run`] with a [`Backing`], something that hands out a new
//! store value on the same sessions each time it is asked, the way a second process opens
//! the same folder or database. Every check then works on sessions whose ids start with a
//! fresh prefix, so a backing shared with other tests (one database for a whole test
//! binary) is fine. The checks: create, read, list; commits (every other one marked as
//! a flow walk's, [`super::FlowPart`]) read back by another store value and reopened there; create twice and unknown ids; a commit out of sequence; a
//! second writer (`Busy`) in the same and in another store value, and `is_held` saying so
//! while it writes and not after; a session's files
//! (written before the session exists, and by a step, as read back by another store
//! value); pinned specs; export and import ([`super::transfer`]); listing with paging
//! ([`SessionStore::list_page`]: pages of several sizes walked to the end, filters with
//! paging, cursors naming no session, the page-size bounds); removal (refused while a
//! writer holds the session, then gone with its files, the id free again); 64
//! sessions written at once on a multi-threaded executor; and shared records
//! ([`super::records`]: a key claimed once until it expires, also when 16 store values
//! claim it at once; read, removed and claimed again by another store value; a kind
//! refused past its capacity until its records expire).
//!
//! The one thing to know: the suite states the *weakest* contract every store keeps. A
//! file a tool writes while a writer is open is only promised to another store value
//! once the next step is committed (the PostgreSQL store flushes files in the step's
//! transaction); the memory and filesystem stores show it at once, which the contract
//! allows. Store-specific behaviour (torn tails, stale writers after a lost lock) is
//! tested beside each store. The checks panic with a message naming the store and the
//! check, as tests do: this module is test code that ships so other crates can run it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use archmax_stdlib::vfs::VfsError;

use super::id::SessionId;
use super::records::{Record, RecordKind};
use super::spec::{PinnedSpec, PinnedState};
use super::store::{ListPage, ListQuery};
use super::{
    Delta, Head, Message, PendingInput, SessionState, SessionStore, Status, StoreError, TrailKind, TrailStep, Variable,
    transfer,
};

/// How many sessions the concurrency check writes at once.
pub const CONCURRENT_SESSIONS: usize = 64;

/// Where a store under test keeps its sessions.
pub trait Backing: Sync {
    /// A new store value on the same sessions, as another process would open it.
    fn store(&self) -> Arc<dyn SessionStore>;
}

impl<F> Backing for F
where
    F: Fn() -> Arc<dyn SessionStore> + Sync,
{
    fn store(&self) -> Arc<dyn SessionStore> {
        self()
    }
}

/// Runs every check against `backing`; `label` names the store in failure messages.
pub fn run(label: &str, backing: &dyn Backing) {
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("{label}: no executor for the conformance suite: {error}"));
    let checks: [(&str, Check); 13] = [
        ("create, read and list", create_read_and_list),
        ("commits read back and reopened by another store value", commits_survive_a_second_process),
        ("create twice and unknown ids", create_twice_and_unknown_ids),
        ("a commit out of sequence", a_commit_out_of_sequence_is_conflict),
        ("one writer per session", a_second_writer_is_busy),
        ("a session's files", files_belong_to_the_store),
        ("pinned specs", pinned_specs_are_kept_by_hash),
        ("export and import", export_and_import_lose_nothing),
        ("listing with paging", listing_with_paging),
        ("removing a session", removing_a_session),
        ("64 sessions at once", many_sessions_at_once),
        ("shared records claimed once until they expire", records_are_claimed_once_until_they_expire),
        ("shared records are bounded", records_are_bounded),
    ];
    for (name, check) in checks {
        let context = Context { label, name, prefix: fresh_prefix(), backing };
        executor.block_on(check(&context));
    }
}

/// A check's future.
type Checked<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;
type Check = for<'a> fn(&'a Context<'a>) -> Checked<'a>;

struct Context<'a> {
    label: &'a str,
    name: &'a str,
    prefix: String,
    backing: &'a dyn Backing,
}

impl Context<'_> {
    fn store(&self) -> Arc<dyn SessionStore> {
        self.backing.store()
    }

    fn id(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// The value of `result`, or a failure naming the store, the check and `what`.
    fn ok<T, E: std::fmt::Debug>(&self, what: &str, result: Result<T, E>) -> T {
        result.unwrap_or_else(|error| panic!("{} / {}: {what}: {error:?}", self.label, self.name))
    }

    fn fail(&self, what: &str) -> ! {
        panic!("{} / {}: {what}", self.label, self.name)
    }

    /// This check's sessions, as `list` returns them.
    async fn listed(&self, store: &dyn SessionStore) -> Vec<String> {
        let ids = self.ok("list", store.list().await);
        ids.into_iter().filter(|id| id.starts_with(&self.prefix)).collect()
    }
}

/// A prefix no earlier check (in this process or an earlier run on the same backing) used.
fn fresh_prefix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
    format!("conf-{}-{nanos:x}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

fn initial(id: &str) -> SessionState {
    SessionState {
        id: SessionId::from_store(id),
        head: Head { workflow: "intake".into(), spec_hash: "ab12".into(), created_at: 7, ..Head::default() },
        ..SessionState::default()
    }
}

/// Step `seq`: a message, a trail step, a variable set and (from step 3) one removed.
fn step(seq: u64) -> Delta {
    let mut variables = vec![(format!("v{seq}"), Some(Variable { value: seq.into(), locked: seq.is_multiple_of(2) }))];
    if seq >= 3 {
        variables.push((format!("v{}", seq - 2), None));
    }
    Delta {
        seq,
        head: Head {
            workflow: "intake".into(),
            spec_hash: "ab12".into(),
            position: Some(format!("state-{seq}")),
            status: if seq.is_multiple_of(4) { Status::AwaitingDecision } else { Status::Running },
            created_at: 7,
            updated_at: 100 + seq,
            // Every third step was written by a traced turn: the ids it keeps for the
            // next turn's link survive every store.
            trace: seq.is_multiple_of(3).then(|| crate::trace::SpanIds {
                trace_id: format!("{:032x}", 0x4bf9_2f35_u64 + seq),
                span_id: format!("{:016x}", 0x00f0_67aa_u64 + seq),
            }),
            // Every other step is marked as a flow walk's: the marker survives every store.
            flow: seq.is_multiple_of(2).then(|| super::FlowPart {
                run: "0123456789abcdef-01234567".into(),
                path: Some(format!("root.step-{seq}")),
                attempt: u32::try_from(seq).ok(),
                turns: 3,
                cost_microunits: 1_250,
                paused: seq.is_multiple_of(4).then(|| format!("root.1.review-{seq}")),
            }),
            ..Head::default()
        },
        messages: vec![
            Message::User { text: format!("message {seq} with ünïcode and \"quotes\""), opening: None },
            Message::Assistant { text: format!("answer {seq}"), tool_calls: Vec::new() },
        ],
        trail: vec![TrailStep::new(&format!("state-{seq}"), TrailKind::Agent, Some("moved".into()), seq)],
        variables,
    }
}

/// Commits steps `from..=to` through `writer`, folding them into `expected`.
async fn commit_steps(
    context: &Context<'_>,
    writer: &mut Box<dyn super::SessionWriter>,
    expected: &mut SessionState,
    to: u64,
) {
    for seq in expected.seq + 1..=to {
        let delta = step(seq);
        context.ok(&format!("commit step {seq}"), writer.commit(&delta).await);
        expected.apply(&delta);
    }
}

fn create_read_and_list<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let (b, a) = (context.id("b"), context.id("a"));
        let writer = context.ok("create b", store.create(&initial(&b)).await);
        drop(writer);
        drop(context.ok("create a", store.create(&initial(&a)).await));
        let read = context.ok("read b", store.read(&b).await);
        if read != Some(initial(&b)) {
            context.fail(&format!("a created session reads back as it was created, got {read:?}"));
        }
        if context.listed(store.as_ref()).await != [a.clone(), b.clone()] {
            context.fail("list returns the sessions sorted");
        }
        let other = context.store();
        if context.listed(other.as_ref()).await != [a, b] {
            context.fail("another store value lists the same sessions");
        }
    })
}

fn commits_survive_a_second_process<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let id = context.id("steps");
        let mut expected = initial(&id);
        {
            let store = context.store();
            let mut writer = context.ok("create", store.create(&expected).await);
            commit_steps(context, &mut writer, &mut expected, 5).await;
        }
        let second = context.store();
        let read = context.ok("read in a second store value", second.read(&id).await);
        if read.as_ref() != Some(&expected) {
            context.fail(&format!("five commits read back whole:\nwanted {expected:?}\ngot    {read:?}"));
        }
        let (opened, mut writer) = context.ok("open in a second store value", second.open(&id).await);
        if opened != expected {
            context.fail("open returns the committed state");
        }
        commit_steps(context, &mut writer, &mut expected, 9).await;
        drop(writer);
        let third = context.store();
        let (reopened, _writer) = context.ok("open in a third store value", third.open(&id).await);
        if reopened != expected {
            context.fail("a reopened session continues where the last writer stopped");
        }
        if reopened.variables.contains_key("v1") || !reopened.variables.contains_key("v9") {
            context.fail("a removed variable stays removed and a set one stays set");
        }
    })
}

fn create_twice_and_unknown_ids<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let id = context.id("once");
        drop(context.ok("create", store.create(&initial(&id)).await));
        match context.store().create(&initial(&id)).await {
            Err(StoreError::Exists(found)) if found == id => {}
            Err(error) => context.fail(&format!("creating it again is Exists, got {error:?}")),
            Ok(_) => context.fail("creating it again is Exists, got a writer"),
        }
        let unknown = context.id("never");
        match store.open(&unknown).await {
            Err(StoreError::Missing(found)) if found == unknown => {}
            Err(error) => context.fail(&format!("opening an unknown session is Missing, got {error:?}")),
            Ok(_) => context.fail("opening an unknown session is Missing, got a writer"),
        }
        if context.ok("read an unknown session", store.read(&unknown).await).is_some() {
            context.fail("reading an unknown session is None");
        }
    })
}

fn a_commit_out_of_sequence_is_conflict<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let id = context.id("seq");
        let mut expected = initial(&id);
        let mut writer = context.ok("create", store.create(&expected).await);
        commit_steps(context, &mut writer, &mut expected, 2).await;
        for wrong in [4, 2, 1] {
            match writer.commit(&step(wrong)).await {
                Err(StoreError::Conflict { .. }) => {}
                other => context.fail(&format!("committing step {wrong} after step 2 is Conflict, got {other:?}")),
            }
        }
        drop(writer);
        if context.ok("read", context.store().read(&id).await).as_ref() != Some(&expected) {
            context.fail("a refused commit writes nothing");
        }
        let (_, mut writer) = context.ok("reopen", store.open(&id).await);
        commit_steps(context, &mut writer, &mut expected, 3).await;
    })
}

fn a_second_writer_is_busy<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let other = context.store();
        let id = context.id("busy");
        let writer = context.ok("create", store.create(&initial(&id)).await);
        for (which, asked) in [("the same store value", &store), ("another store value", &other)] {
            if context.ok("is_held while a writer holds it", asked.is_held(&id).await) != Some(true) {
                context.fail(&format!("a held session is held, as {which} sees it"));
            }
        }
        for (which, attempt) in [("the same store value", &store), ("another store value", &other)] {
            match attempt.open(&id).await {
                Err(StoreError::Busy(found)) if found == id => {}
                Err(error) => context.fail(&format!("a second writer in {which} is Busy, got {error:?}")),
                Ok(_) => context.fail(&format!("a second writer in {which} is Busy, got a writer")),
            }
        }
        if context.ok("read while a writer holds it", other.read(&id).await).is_none() {
            context.fail("a held session can still be read");
        }
        drop(writer);
        if context.ok("is_held once the writer is gone", other.is_held(&id).await) != Some(false) {
            context.fail("a session no writer holds is not held (so a cut turn shows as interrupted)");
        }
        if context.ok("is_held of an unknown id", other.is_held(&context.id("nobody")).await).is_some() {
            context.fail("an unknown session is neither held nor free");
        }
        let (_, writer) = context.ok("open once the first writer is gone", other.open(&id).await);
        drop(writer);
        drop(context.ok("open again after that writer was dropped", store.open(&id).await));
    })
}

fn removing_a_session<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let other = context.store();
        let id = context.id("removed");
        let kept = context.id("kept");
        let mut expected = initial(&id);
        let mut writer = context.ok("create", store.create(&expected).await);
        let files = context.ok("files", store.files(&id));
        context.ok("write a file", files.write("scratchpad/note.md", b"note"));
        commit_steps(context, &mut writer, &mut expected, 2).await;
        drop(context.ok("create another", store.create(&initial(&kept)).await));
        // A session open for writing is not removed, from this store value or another.
        match other.remove(&id).await {
            Err(StoreError::Busy(found)) if found == id => {}
            outcome => context.fail(&format!("removing a session a writer holds is Busy, got {outcome:?}")),
        }
        if context.ok("read after a refused removal", other.read(&id).await) != Some(expected.clone()) {
            context.fail("a refused removal leaves the session as it was");
        }
        drop(writer);
        if !context.ok("remove", other.remove(&id).await) {
            context.fail("removing a session that exists says so");
        }
        if context.ok("read after removal", store.read(&id).await).is_some() {
            context.fail("a removed session reads as missing");
        }
        if context.listed(store.as_ref()).await != [kept.clone()] {
            context.fail("a removed session is not listed and the other one still is");
        }
        let listed = context.ok("list a removed session's files", context.store().files(&id)).list("scratchpad");
        if listed.is_ok_and(|entries| !entries.is_empty()) {
            context.fail("a removed session's files are gone");
        }
        if context.ok("remove again", store.remove(&id).await) {
            context.fail("removing a session that does not exist says so");
        }
        match store.open(&id).await {
            Err(StoreError::Missing(_)) => {}
            Err(error) => context.fail(&format!("a removed session cannot be opened, got {error:?}")),
            Ok(_) => context.fail("a removed session cannot be opened"),
        }
        // The id can be used again.
        drop(context.ok("create under a removed id", store.create(&initial(&id)).await));
    })
}

fn files_belong_to_the_store<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let id = context.id("files");
        // A sub-workflow's seeds are written before its session exists.
        let files = context.ok("files before the session exists", store.files(&id));
        context.ok("write a seed", files.write("scratchpad/seed.md", b"seeded"));
        let mut expected = initial(&id);
        let mut writer = context.ok("create", store.create(&expected).await);
        // A step's files: written by its tool calls, committed with it.
        context.ok("write an artifact", files.write("artifacts/report/out.txt", b"report"));
        context.ok("write a note", files.write("scratchpad/note.md", b"first"));
        context.ok("overwrite the note", files.write("scratchpad/note.md", b"second"));
        context.ok("write a scrap", files.write("scratchpad/scrap.md", b"scrap"));
        context.ok("remove the scrap", files.remove("scratchpad/scrap.md"));
        if context.ok("read own write", files.read("scratchpad/note.md")) != b"second" {
            context.fail("a session reads its own latest write");
        }
        commit_steps(context, &mut writer, &mut expected, 1).await;
        drop(writer);

        let other = context.ok("files in another store value", context.store().files(&id));
        let read = |path: &str| context.ok(&format!("read {path}"), other.read(path));
        if read("scratchpad/seed.md") != b"seeded" || read("scratchpad/note.md") != b"second" {
            context.fail("seeds and a step's writes are kept by the store");
        }
        if read("artifacts/report/out.txt") != b"report" {
            context.fail("artifacts are kept by the store");
        }
        let names = |dir: &str| -> Vec<(String, bool, u64)> {
            let entries = context.ok(&format!("list {dir}"), other.list(dir));
            entries.into_iter().map(|entry| (entry.name, entry.is_dir, entry.size)).collect()
        };
        let scratchpad = names("scratchpad");
        if scratchpad != [("note.md".to_string(), false, 6), ("seed.md".to_string(), false, 6)] {
            context.fail(&format!("a removed file is gone and sizes are kept, got {scratchpad:?}"));
        }
        if names("artifacts") != [("report".to_string(), true, 0)] {
            context.fail("folders are listed as folders");
        }
        let stat = context.ok("stat a folder", other.stat("artifacts/report"));
        if !stat.is_some_and(|entry| entry.is_dir) {
            context.fail("stat sees a folder");
        }
        if context.ok("stat a missing file", other.stat("scratchpad/scrap.md")).is_some() {
            context.fail("stat of a removed file is None");
        }
        match other.read("scratchpad/scrap.md") {
            Err(VfsError::NotFound(_)) => {}
            result => context.fail(&format!("reading a removed file is NotFound, got {result:?}")),
        }
        match other.read("artifacts/report") {
            Err(VfsError::IsADirectory(_)) => {}
            result => context.fail(&format!("reading a folder is IsADirectory, got {result:?}")),
        }
        match other.read_limited("scratchpad/note.md", 3) {
            Err(VfsError::TooLarge { size: 6, limit: 3, .. }) => {}
            result => context.fail(&format!("a bounded read of a larger file is TooLarge, got {result:?}")),
        }
        match other.read("../escape") {
            Err(VfsError::Escape(_)) => {}
            result => context.fail(&format!("a climbing path is refused, got {result:?}")),
        }
        // Each session has its own files.
        let neighbour = context.ok("a neighbour's files", store.files(&context.id("files-neighbour")));
        if context.ok("stat in the neighbour", neighbour.stat("scratchpad/note.md")).is_some() {
            context.fail("one session's files are not another's");
        }
    })
}

fn pinned_specs_are_kept_by_hash<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let hash = format!("{:016x}", fnv(&context.prefix));
        let spec = PinnedSpec {
            workflow: "intake".into(),
            spec_hash: hash.clone(),
            states: vec![PinnedState { slug: "draft".into(), kind: "agent".into(), digest: "d1".into() }],
        };
        let store = context.store();
        if context.ok("an unknown spec", store.spec(&hash).await).is_some() {
            context.fail("an unknown hash has no spec");
        }
        context.ok("keep a spec", store.keep_spec(&spec).await);
        let again = PinnedSpec { workflow: "other".into(), ..spec.clone() };
        context.ok("keep it again", context.store().keep_spec(&again).await);
        if context.ok("read it back", context.store().spec(&hash).await) != Some(spec) {
            context.fail("the first spec kept under a hash is the one read back");
        }
    })
}

/// A stable 64-bit digest of `text` (FNV-1a), to make hex hashes unique per check.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
}

fn export_and_import_lose_nothing<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let id = context.id("moved");
        let spec_hash = format!("{:016x}", fnv(&id));
        let spec = PinnedSpec { workflow: "intake".into(), spec_hash: spec_hash.clone(), states: Vec::new() };
        let source = context.store();
        context.ok("keep the spec", source.keep_spec(&spec).await);
        let mut expected =
            SessionState { head: Head { spec_hash: spec_hash.clone(), ..initial(&id).head }, ..initial(&id) };
        let mut writer = context.ok("create", source.create(&expected).await);
        let files = context.ok("files", source.files(&id));
        context.ok("write a binary file", files.write("artifacts/blob.bin", &[0, 159, 146, 150, 255]));
        context.ok("write a note", files.write("scratchpad/deep/note.md", b"note"));
        for seq in 1..=3 {
            let delta = Delta { head: Head { spec_hash: spec_hash.clone(), ..step(seq).head }, ..step(seq) };
            context.ok("commit", writer.commit(&delta).await);
            expected.apply(&delta);
        }
        drop(writer);

        let mut exported = Vec::new();
        let summary = context.ok("export", transfer::export(source.as_ref(), &id, &mut exported).await);
        if summary.files != 2 || !summary.spec {
            context.fail(&format!("the export carries both files and the spec, got {summary:?}"));
        }
        // Into a fresh backing would be the real use; here the same backing must refuse
        // it first (the session exists), then take it once it is renamed away.
        match transfer::import(context.store().as_ref(), &mut exported.as_slice()).await {
            Err(transfer::TransferError::Store(StoreError::Exists(found))) if found == id => {}
            other => context.fail(&format!("importing over an existing session is Exists, got {other:?}")),
        }
        let renamed = context.id("moved-copy");
        let text = String::from_utf8(exported).unwrap_or_else(|_| context.fail("an export is UTF-8 text"));
        let retargeted = text.replace(&id, &renamed);
        let target = context.store();
        let imported = context.ok("import", transfer::import(target.as_ref(), &mut retargeted.as_bytes()).await);
        if imported.id != renamed {
            context.fail("import names the session it created");
        }
        let read = context.ok("read the import", context.store().read(&renamed).await);
        let wanted = SessionState { id: SessionId::from_store(renamed.clone()), ..expected.clone() };
        if read.as_ref() != Some(&wanted) {
            context.fail(&format!("an imported session is the exported one:\nwanted {wanted:?}\ngot    {read:?}"));
        }
        let copied = context.ok("the import's files", context.store().files(&renamed));
        let blob = context.ok("read the binary file", copied.read("artifacts/blob.bin"));
        let note = context.ok("read the note", copied.read("scratchpad/deep/note.md"));
        if blob != [0, 159, 146, 150, 255] || note != b"note" {
            context.fail("an import carries every file byte for byte");
        }
        let (reopened, mut writer) = context.ok("open the import", target.open(&renamed).await);
        if reopened.seq != 3 {
            context.fail("an imported session continues from its last step");
        }
        let next = Delta { head: Head { spec_hash, ..step(4).head }, ..step(4) };
        context.ok("commit after import", writer.commit(&next).await);

        let mut truncated = text.lines().take(2).collect::<Vec<_>>().join("\n").into_bytes();
        truncated.push(b'\n');
        let cut_id = context.id("never-imported");
        let cut = String::from_utf8_lossy(&truncated).replace(&id, &cut_id);
        if transfer::import(context.store().as_ref(), &mut cut.as_bytes()).await.is_ok() {
            context.fail("a truncated export is refused");
        }
        if context.ok("read after a refused import", context.store().read(&cut_id).await).is_some() {
            context.fail("a refused import creates nothing");
        }
    })
}

fn many_sessions_at_once<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let barrier = Arc::new(tokio::sync::Barrier::new(CONCURRENT_SESSIONS));
        let tasks: Vec<_> = (0..CONCURRENT_SESSIONS)
            .map(|index| {
                let store = Arc::clone(&store);
                let barrier = Arc::clone(&barrier);
                let id = context.id(&format!("fleet-{index:02}"));
                tokio::spawn(async move {
                    let mut state = initial(&id);
                    let mut writer = store.create(&state).await.map_err(|error| format!("create {id}: {error}"))?;
                    // Every session holds its writer here until all 64 do.
                    barrier.wait().await;
                    let files = store.files(&id).map_err(|error| format!("files {id}: {error}"))?;
                    for seq in 1..=3 {
                        let body = format!("{id} step {seq}");
                        files.write("scratchpad/own.md", body.as_bytes()).map_err(|error| error.to_string())?;
                        let delta = step(seq);
                        writer.commit(&delta).await.map_err(|error| format!("commit {id}/{seq}: {error}"))?;
                        state.apply(&delta);
                    }
                    Ok::<_, String>(state)
                })
            })
            .collect();
        let mut expected = BTreeMap::new();
        for task in tasks {
            let state = context.ok("a session task", context.ok("join", task.await));
            expected.insert(state.id.to_string(), state);
        }
        let second = context.store();
        let listed = context.listed(second.as_ref()).await;
        if listed.len() != CONCURRENT_SESSIONS || !listed.iter().all(|id| expected.contains_key(id)) {
            context.fail(&format!("all {CONCURRENT_SESSIONS} sessions are listed, got {}", listed.len()));
        }
        let reads: Vec<_> = expected
            .keys()
            .map(|id| {
                let store = Arc::clone(&second);
                let id = id.clone();
                tokio::spawn(async move {
                    let state = store.read(&id).await.map_err(|error| error.to_string())?;
                    let files = store.files(&id).map_err(|error| error.to_string())?;
                    let note = files.read("scratchpad/own.md").map_err(|error| error.to_string())?;
                    Ok::<_, String>((id, state, note))
                })
            })
            .collect();
        for read in reads {
            let (id, state, note) = context.ok("a read task", context.ok("join", read.await));
            if state.as_ref() != expected.get(&id) {
                context.fail(&format!("{id} reads back as its own writer left it"));
            }
            if note != format!("{id} step 3").into_bytes() {
                context.fail(&format!("{id} keeps its own last file"));
            }
        }
    })
}

/// The instant the listing check asks "due by": 2026-01-05T09:30:00Z.
const DUE_BY_MS: u64 = 1_767_605_400_000;

/// The resume times of the listing check's waiting sessions, and whether each is due by
/// [`DUE_BY_MS`]. Compared as text, the last three would be answered wrongly.
const RESUME_TIMES: [(Option<&str>, bool); 5] = [
    (Some("2026-01-05T09:29:59Z"), true),
    (Some("2026-01-05T11:30:00+02:00"), true),
    (Some("2026-01-05T09:30:00.001Z"), false),
    (Some("2026-01-05T08:00:00-03:00"), false),
    (None, false),
];

/// How many sessions the listing check spreads over its two workflows.
const LISTED: usize = 25;

/// One session of the listing check: its id, workflow, status and whether it is due.
struct Listed {
    id: String,
    workflow: String,
    status: Status,
    due: bool,
}

/// The listing check's sessions, sorted by id, and its two workflows.
struct Listing {
    sessions: Vec<Listed>,
    workflows: [String; 2],
}

impl Listing {
    /// The ids of the sessions `keep` admits, in id order.
    fn ids(&self, keep: impl Fn(&Listed) -> bool) -> Vec<String> {
        self.sessions.iter().filter(|listed| keep(listed)).map(|listed| listed.id.clone()).collect()
    }

    fn workflow(&self, index: usize) -> Option<String> {
        Some(self.workflows[index].clone())
    }
}

fn listing_with_paging<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let store = context.store();
        let listing = create_listed_sessions(context, store.as_ref()).await;
        pages_of_every_size_walk_every_session(context, store.as_ref(), &listing).await;
        filters_combine_with_paging(context, store.as_ref(), &listing).await;
        cursors_need_not_name_a_session(context, store.as_ref(), &listing).await;
        page_sizes_are_bounded(context, store, &listing).await;
    })
}

/// Every status in both workflows, five of them waiting (two due); half are created as
/// they are listed, half get there by a committed step.
async fn create_listed_sessions(context: &Context<'_>, store: &dyn SessionStore) -> Listing {
    let workflows = [context.id("alpha"), context.id("beta")];
    let statuses =
        [Status::Running, Status::Completed, Status::AwaitingDecision, Status::AwaitingInput, Status::Failed];
    let mut sessions = Vec::new();
    for index in 0..LISTED {
        // Upper and lower case and punctuation: byte order is not a language's order.
        let name = ["S", "s", "s-", "s~", "s_"][(index / 2) % 5];
        let status = statuses[index % 5];
        let (resume_at, due) = RESUME_TIMES[(index / 5) % RESUME_TIMES.len()];
        let waits = status == Status::AwaitingInput;
        let listed = Listed {
            id: context.id(&format!("{name}{index:02}")),
            workflow: workflows[(index / 5) % 2].clone(),
            status,
            due: waits && due,
        };
        let head = Head {
            workflow: listed.workflow.clone(),
            spec_hash: "ab12".into(),
            status,
            pending_input: waits.then(|| PendingInput {
                state: "wait".into(),
                reason: "a payment".into(),
                parked_at: "2026-01-05T09:00:00Z".into(),
                resume_at: resume_at.map(str::to_string),
                child: None,
            }),
            created_at: 7,
            ..Head::default()
        };
        let first =
            if index % 2 == 0 { head.clone() } else { Head { workflow: head.workflow.clone(), ..initial("").head } };
        let created =
            SessionState { id: SessionId::from_store(listed.id.clone()), head: first, ..SessionState::default() };
        let mut writer = context.ok("create", store.create(&created).await);
        if index % 2 == 1 {
            context.ok("commit", writer.commit(&Delta { head, ..step(1) }).await);
        }
        sessions.push(listed);
    }
    sessions.sort_by(|left, right| left.id.cmp(&right.id));
    let listing = Listing { sessions, workflows };
    if listing.ids(|listed| listed.due).len() != 2
        || listing.ids(|listed| listed.status == Status::AwaitingInput).len() != 5
    {
        context.fail("the listing check has two due sessions among five waiting ones");
    }
    listing
}

/// Walked from a cursor that sorts just before this check's sessions (so other checks'
/// sessions stay out), pages of every size list every session once, in id order.
async fn pages_of_every_size_walk_every_session(context: &Context<'_>, store: &dyn SessionStore, listing: &Listing) {
    let all = listing.ids(|_| true);
    for limit in [1, 2, 3, 7, LISTED, ListQuery::MAX_LIMIT] {
        let query = ListQuery { cursor: Some(context.prefix.clone()), limit, ..ListQuery::default() };
        let mine = walk_own(context, store, query, &format!("unfiltered, {limit} a page")).await;
        if mine != all {
            context.fail(&format!(
                "pages of {limit} walk every session once in id order:\nwanted {all:?}\ngot    {mine:?}"
            ));
        }
    }
    // A page's sessions are the sessions as a read gives them, in any store value.
    let other = context.store();
    let query = ListQuery { workflow: listing.workflow(1), limit: 4, ..ListQuery::default() };
    let page = context.ok("a page", other.list_page(&query).await);
    for state in &page.sessions {
        let read = context.ok("read", other.read(&state.id).await);
        if read.as_ref() != Some(state) {
            context.fail(&format!("a listed session is the session read: {}", state.id));
        }
    }
}

/// Each filter, alone and combined, walked to the end of the whole store.
async fn filters_combine_with_paging(context: &Context<'_>, store: &dyn SessionStore, listing: &Listing) {
    let [alpha, beta] = &listing.workflows;
    let (in_alpha, in_beta) = (listing.workflow(0), listing.workflow(1));
    let after_others = Some(context.prefix.clone());
    let filtered: [(&str, ListQuery, Vec<String>); 7] = [
        (
            "one workflow",
            ListQuery { workflow: in_alpha.clone(), limit: 2, ..ListQuery::default() },
            listing.ids(|listed| listed.workflow == *alpha),
        ),
        (
            "a workflow and a status",
            ListQuery {
                workflow: in_beta.clone(),
                status: Some(Status::AwaitingInput),
                limit: 1,
                ..ListQuery::default()
            },
            listing.ids(|listed| listed.workflow == *beta && listed.status == Status::AwaitingInput),
        ),
        (
            "parked",
            ListQuery { workflow: in_alpha.clone(), parked: Some(true), limit: 3, ..ListQuery::default() },
            listing.ids(|listed| listed.workflow == *alpha && listed.status.is_parked()),
        ),
        (
            "not parked",
            ListQuery { workflow: in_beta.clone(), parked: Some(false), limit: 4, ..ListQuery::default() },
            listing.ids(|listed| listed.workflow == *beta && !listed.status.is_parked()),
        ),
        (
            "due, compared as instants",
            ListQuery { cursor: after_others, due_by: Some(DUE_BY_MS), limit: 1, ..ListQuery::default() },
            listing.ids(|listed| listed.due),
        ),
        (
            "due in one workflow and parked",
            ListQuery {
                workflow: in_alpha,
                parked: Some(true),
                due_by: Some(DUE_BY_MS),
                limit: 2,
                ..ListQuery::default()
            },
            listing.ids(|listed| listed.workflow == *alpha && listed.due),
        ),
        (
            "a status no session has",
            ListQuery { workflow: in_beta, status: Some(Status::Rejected), ..ListQuery::default() },
            Vec::new(),
        ),
    ];
    for (what, query, wanted) in filtered {
        let mine = walk_own(context, store, query, what).await;
        if mine != wanted {
            context.fail(&format!("{what}: wanted {wanted:?}\ngot    {mine:?}"));
        }
    }
}

/// A cursor that sorts between two sessions lists from the second; one past every
/// session lists nothing; one holding a NUL (which no id can) lists what sorts after it.
async fn cursors_need_not_name_a_session(context: &Context<'_>, store: &dyn SessionStore, listing: &Listing) {
    let all = listing.ids(|_| true);
    let query = ListQuery { cursor: Some(format!("{}-gone", all[5])), limit: 3, ..ListQuery::default() };
    let page = context.ok("a page after a cursor naming no session", store.list_page(&query).await);
    if listed_ids(&page) != all[6..9] {
        context.fail(&format!("a cursor naming no session lists those after it, got {:?}", listed_ids(&page)));
    }
    for cursor in [context.id("~~~~"), format!("{}\u{10FFFF}", context.prefix)] {
        let query = ListQuery { cursor: Some(cursor), workflow: listing.workflow(0), ..ListQuery::default() };
        let page = context.ok("a page past the end", store.list_page(&query).await);
        if !page.sessions.is_empty() || page.next.is_some() {
            context.fail("a cursor past every session lists nothing and no next page");
        }
    }
    let query = ListQuery {
        cursor: Some(format!("{}\u{0}", all[0])),
        workflow: listing.workflow(0),
        limit: 1,
        ..ListQuery::default()
    };
    let page = context.ok("a cursor with a NUL", store.list_page(&query).await);
    let mut wanted = listing.ids(|listed| listed.workflow == listing.workflows[0] && listed.id > all[0]);
    wanted.truncate(1);
    if listed_ids(&page) != wanted {
        context.fail(&format!("a cursor with a NUL lists what sorts after it, got {:?}", listed_ids(&page)));
    }
    // No workflow is named with a NUL: such a filter lists nothing (it is not an error).
    let nul = listing.workflow(0).map(|workflow| format!("{workflow}\u{0}"));
    let query = ListQuery { workflow: nul, ..ListQuery::default() };
    let page = context.ok("a workflow filter with a NUL", store.list_page(&query).await);
    if !page.sessions.is_empty() || page.next.is_some() {
        context.fail(&format!("a workflow filter with a NUL lists nothing, got {:?}", listed_ids(&page)));
    }
}

/// A page holds at least one and at most [`ListQuery::MAX_LIMIT`] sessions, whatever
/// the limit asked.
async fn page_sizes_are_bounded(context: &Context<'_>, store: Arc<dyn SessionStore>, listing: &Listing) {
    let query = ListQuery { workflow: listing.workflow(0), limit: 0, ..ListQuery::default() };
    let page = context.ok("a page of limit 0", store.list_page(&query).await);
    if page.sessions.len() != 1 || page.next.is_none() {
        context.fail(&format!("limit 0 lists one session and a next page, got {}", page.sessions.len()));
    }
    // One more session than the largest page, created at once (a store that syncs each
    // create to disk shares the cost between them).
    let many = context.id("many");
    let creates: Vec<_> = (0..=ListQuery::MAX_LIMIT)
        .map(|index| {
            let store = Arc::clone(&store);
            let id = context.id(&format!("many-{index:03}"));
            let state = SessionState { head: Head { workflow: many.clone(), ..initial(&id).head }, ..initial(&id) };
            tokio::spawn(async move {
                store.create(&state).await.map(drop).map_err(|error| format!("create {id}: {error}"))
            })
        })
        .collect();
    for create in creates {
        context.ok("create one of many", context.ok("join", create.await));
    }
    let query = ListQuery { workflow: Some(many), limit: usize::MAX, ..ListQuery::default() };
    let page = context.ok("a page of the largest limit", store.list_page(&query).await);
    if page.sessions.len() != ListQuery::MAX_LIMIT || page.next.is_none() {
        let max = ListQuery::MAX_LIMIT;
        context.fail(&format!("a limit past {max} lists {max} and a next page, got {}", page.sessions.len()));
    }
    let rest = ListQuery { cursor: page.next.clone(), ..query };
    let last = context.ok("the page after the largest", store.list_page(&rest).await);
    if last.sessions.len() != 1 || last.next.is_some() {
        context.fail("the session past the largest page is on the next page, the last");
    }
}

/// The ids of a page's sessions.
fn listed_ids(page: &ListPage) -> Vec<String> {
    page.sessions.iter().map(|state| state.id.to_string()).collect()
}

/// [`walk`], keeping only this check's sessions.
async fn walk_own(context: &Context<'_>, store: &dyn SessionStore, query: ListQuery, what: &str) -> Vec<String> {
    let walked = walk(context, store, query, what).await;
    walked.into_iter().filter(|id| id.starts_with(&context.prefix)).collect()
}

/// Walks `query`'s pages from its cursor to the end and returns every listed id,
/// checking each page: at most its size, in id order, after the cursor, the next cursor
/// naming its last session, and nothing unreadable.
async fn walk(context: &Context<'_>, store: &dyn SessionStore, mut query: ListQuery, what: &str) -> Vec<String> {
    let mut walked: Vec<String> = Vec::new();
    // More pages than sessions would be a walk that never ends.
    for _ in 0..=LISTED * 4 + ListQuery::MAX_LIMIT * 4 {
        let page = context.ok(&format!("{what}: a page"), store.list_page(&query).await);
        let ids = listed_ids(&page);
        if ids.len() > query.page_size() {
            context.fail(&format!("{what}: a page holds at most {} sessions, got {}", query.page_size(), ids.len()));
        }
        if !page.unreadable.is_empty() {
            context.fail(&format!("{what}: nothing is unreadable, got {:?}", page.unreadable));
        }
        let after = walked.last().cloned().or(query.cursor.clone());
        let mut previous = after.as_deref();
        for id in &ids {
            if previous.is_some_and(|previous| id.as_str() <= previous) {
                context.fail(&format!("{what}: pages list ids in order after the cursor, got {id} after {previous:?}"));
            }
            previous = Some(id);
        }
        walked.extend(ids);
        match page.next {
            None => return walked,
            Some(next) => {
                if Some(&next) != walked.last() || page.sessions.is_empty() {
                    context.fail(&format!("{what}: the next cursor names the page's last session, got {next}"));
                }
                query.cursor = Some(next);
            }
        }
    }
    context.fail(&format!("{what}: the walk ends"))
}

/// The clock the record checks start from: now, so records a previous run on the same
/// database left behind have expired by the time a later run counts them.
fn records_epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
}

fn conformance_record(key: String, value: &[u8], expires_ms: u64) -> Record {
    Record { kind: RecordKind::Conformance, key, value: value.to_vec(), expires_ms }
}

fn records_are_claimed_once_until_they_expire<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let now = records_epoch_ms();
        let key = context.id("claimed");
        let first = conformance_record(key.clone(), b"first", now + 1_000);
        if !context.ok("claim a fresh key", context.store().claim_record(&first, now).await) {
            context.fail("a key nobody holds is claimed");
        }
        let second = conformance_record(key.clone(), b"second", now + 5_000);
        if context.ok("claim it again", context.store().claim_record(&second, now + 999).await) {
            context.fail("a live record's key is refused to a second claim (another store value)");
        }
        let read = context.ok("read it", context.store().read_record(RecordKind::Conformance, &key, now + 999).await);
        if read.as_deref() != Some(b"first".as_slice()) {
            context.fail("another store value reads the value of the claim that won");
        }
        let expired = context.store().read_record(RecordKind::Conformance, &key, now + 1_000).await;
        if context.ok("read it expired", expired).is_some() {
            context.fail("an expired record reads as absent");
        }
        if !context.ok("claim it expired", context.store().claim_record(&second, now + 1_000).await) {
            context.fail("an expired record's key is claimed again");
        }
        if !context.ok("remove it", context.store().remove_record(RecordKind::Conformance, &key).await) {
            context.fail("removing a kept record says it was kept");
        }
        let gone = context.store().read_record(RecordKind::Conformance, &key, now + 1_000).await;
        if context.ok("read it removed", gone).is_some() {
            context.fail("a removed record reads as absent");
        }
        if context.ok("remove it again", context.store().remove_record(RecordKind::Conformance, &key).await) {
            context.fail("removing nothing says so");
        }
        match context.store().claim_record(&conformance_record("a/../b".to_string(), b"", now + 1), now).await {
            Err(StoreError::Record { .. }) => {}
            other => context.fail(&format!("a key that is a path is refused, not {other:?}")),
        }
        // Sixteen store values claim one key at once: exactly one wins.
        let raced = context.id("raced");
        let claims = (0..16).map(|index| {
            let store = context.store();
            let record = conformance_record(raced.clone(), format!("{index}").as_bytes(), now + 2_000);
            tokio::spawn(async move { store.claim_record(&record, now).await })
        });
        let mut winners = 0;
        for claim in futures_util::future::join_all(claims).await {
            let claimed = context.ok("join a claim", claim);
            if context.ok("claim the raced key", claimed) {
                winners += 1;
            }
        }
        if winners != 1 {
            context.fail(&format!("one of 16 claims of a key at once wins, not {winners}"));
        }
        context.ok("clean up", context.store().remove_record(RecordKind::Conformance, &raced).await);
    })
}

fn records_are_bounded<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        // Later than every record the other check (or an earlier run) left live.
        let now = records_epoch_ms() + 60_000;
        let capacity = RecordKind::Conformance.capacity();
        for index in 0..capacity {
            let record = conformance_record(context.id(&format!("fill-{index}")), b"x", now + 1_000);
            if !context.ok("fill the kind", context.store().claim_record(&record, now).await) {
                context.fail("a fresh key is claimed while the kind has room");
            }
        }
        let over = conformance_record(context.id("over"), b"x", now + 1_000);
        match context.store().claim_record(&over, now + 1).await {
            Err(StoreError::RecordsFull { capacity: found, .. }) if found == capacity => {}
            other => context.fail(&format!("a claim past the capacity is refused as full, not {other:?}")),
        }
        let held = conformance_record(context.id("fill-0"), b"y", now + 1_000);
        if context.ok("claim a held key of a full kind", context.store().claim_record(&held, now + 1).await) {
            context.fail("a live key of a full kind is still refused as held");
        }
        // Once they expire, the kind takes claims again: the expired ones were pruned.
        if !context.ok("claim after expiry", context.store().claim_record(&over, now + 1_000).await) {
            context.fail("a full kind takes claims again once its records expire");
        }
    })
}
