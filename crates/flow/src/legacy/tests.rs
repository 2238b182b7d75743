use archmax_vm::session::memory::MemoryStore;

use super::*;
use crate::record::read;

const RUN: &str = "0123456789abcdef-01234567";

fn workspace(label: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("archmax-flow-legacy-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(LEGACY_DIR)).expect("the old folder");
    root
}

/// A walk the old layout left paused at `root.1.review`, with its root attempt filed
/// (and a line torn by a crash at the end of the record).
fn old_walk(root: &Path) {
    let folder = root.join(LEGACY_DIR);
    let record = format!(
        "{{\"header\":{{\"flow\":\"release\",\"run\":\"{RUN}\",\"digest\":\"d\",\"input\":\"Ship\",\"max_attempts\":null}}}}\n\
         {{\"hook\":{{\"key\":\"root.1@enter\",\"answer\":{{\"proceed\":true,\"reason\":null,\"status\":0}}}}}}\n\
         {{\"step\":{{\"key\":\"root.1.draft\",\"step\":{{\"outcome\":\"passed\",\"note\":\"drafted\",\"reason\":null,\
         \"gives\":{{}},\"messages\":[],\"spend\":{{\"turns\":1,\"input_tokens\":5,\"output_tokens\":7,\
         \"cost_microunits\":0}},\"tape\":null}}}}}}\n\
         {{\"paused\":{{\"key\":\"root.1.review\"}}}}\n\
         {{\"step\":{{\"key\":\"root.1.rev"
    );
    std::fs::write(folder.join(format!("{RUN}.flow.jsonl")), record).expect("the record");
    let session = format!(
        "{{\"id\":\"{RUN}.root.1\",\"flow\":\"release\",\"run\":\"{RUN}\",\"scope\":\"root\",\"attempt\":1,\
         \"failed\":true,\"spend\":{{\"turns\":1,\"input_tokens\":5,\"output_tokens\":7,\"cost_microunits\":30}},\
         \"messages\":[{{\"role\":\"assistant\",\"text\":\"drafted\"}}]}}\n"
    );
    std::fs::write(folder.join(format!("{RUN}.root.1.json")), session).expect("the session");
}

#[tokio::test(flavor = "current_thread")]
async fn an_old_walk_is_imported_once_and_the_folder_renamed_after_the_commit() {
    let root = workspace("import");
    old_walk(&root);
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let imported = import(&root, store.clone(), 9).await.expect("imported");
    assert_eq!(
        imported,
        Some(Imported { records: 1, sessions: 1, renamed_to: root.join(IMPORTED_DIR) }),
        "the walk's record and its attempt"
    );
    assert!(!root.join(LEGACY_DIR).exists() && root.join(IMPORTED_DIR).join(format!("{RUN}.flow.jsonl")).exists());
    let state = store.read(RUN).await.ok().flatten().expect("the record");
    let recorded = read(RUN, &state).expect("reads as a record");
    assert_eq!(recorded.paused.as_deref(), Some("root.1.review"));
    assert!(recorded.steps.contains_key("root.1.draft") && recorded.steps.len() == 1, "the torn line is dropped");
    assert!(recorded.hooks.contains_key("root.1@enter"));
    assert!(!recorded.finished);
    assert_eq!(recorded.header.map(|header| header.input), Some("Ship".to_string()));
    let attempt = store.read(&format!("{RUN}.root.1")).await.ok().flatten().expect("the attempt");
    assert_eq!(attempt.head.status, Status::Failed);
    let flow = attempt.head.flow.expect("a flow marker");
    assert_eq!((flow.path.as_deref(), flow.attempt, flow.cost_microunits), (Some("root"), Some(1), 30));
    assert_eq!(attempt.messages.len(), 1);
    // Done once: no folder, nothing to do.
    assert_eq!(import(&root, store, 10).await.expect("nothing to import"), None);
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "current_thread")]
async fn an_import_cut_before_its_rename_finishes_on_the_next_run() {
    let root = workspace("resumed");
    old_walk(&root);
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    // The first import committed the attempt, then its process died.
    let attempt = attempt_state(
        &format!("{RUN}.root.1"),
        &std::fs::read_to_string(root.join(LEGACY_DIR).join(format!("{RUN}.root.1.json"))).expect("the file"),
    )
    .expect("reads");
    drop(store.create(&attempt).await.expect("committed"));
    let imported = import(&root, store.clone(), 9).await.expect("imported").expect("something to import");
    assert_eq!((imported.records, imported.sessions), (1, 0), "the attempt was already there");
    assert!(store.read(RUN).await.ok().flatten().is_some());
    // A folder already renamed by an earlier import is left alone.
    std::fs::create_dir_all(root.join(LEGACY_DIR)).expect("another old folder");
    let again = import(&root, store, 10).await.expect("imported").expect("an empty folder");
    assert_eq!(again.renamed_to, root.join(format!("{IMPORTED_DIR}.2")));
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "current_thread")]
async fn a_damaged_old_record_refuses_the_import_before_anything_is_written() {
    let root = workspace("damaged");
    old_walk(&root);
    let file = root.join(LEGACY_DIR).join(format!("{RUN}.flow.jsonl"));
    let text = std::fs::read_to_string(&file).expect("the record");
    std::fs::write(&file, text.replacen("{\"paused\"", "{\"pasued\"", 1)).expect("damaged");
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let refused = import(&root, store.clone(), 9).await.err().map(|error| error.to_string()).unwrap_or_default();
    assert!(
        refused.starts_with(&format!(
            "`.archmax-flows/{RUN}.flow.jsonl` cannot be imported into the session store: line 4 is not a line of a \
             flow record ("
        )),
        "{refused}"
    );
    assert!(refused.contains("finish its walks with an archmax built from commit a127c9e or earlier"), "{refused}");
    assert_eq!(store.list().await.ok(), Some(Vec::new()), "nothing was written");
    assert!(file.exists(), "the folder is as it was");
    let headless = "{\"paused\":{\"key\":\"root.1.review\"}}\n";
    std::fs::write(&file, headless).expect("no header");
    let refused = import(&root, store, 9).await.err().map(|error| error.to_string()).unwrap_or_default();
    assert!(refused.contains("it has no header line"), "{refused}");
    let _ = std::fs::remove_dir_all(&root);
}
