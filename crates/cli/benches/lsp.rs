//! How long the language server takes from an edit to the diagnostics it publishes, for
//! a generated 200-state workflow on disk opened in the editor (goal: 10 ms). Each
//! iteration edits the open text, alternately breaking and mending one transition
//! target, so every re-check also converts and publishes a changed finding. Measured
//! 2.8 ms on 2026-12-02 (2 shared cores, release profile).

#[path = "../../compiler/benches/common/generated.rs"]
mod generated;
// The server's own modules, as the binary compiles them.
#[allow(dead_code, unused_imports)]
#[path = "../src/lsp/mod.rs"]
mod lsp;

use std::hint::black_box;
use std::str::FromStr;

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(criterion: &mut Criterion) {
    let root = std::env::temp_dir().join(format!("archmax-lsp-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("workflows/generated/scripts")).expect("workspace");
    let spec = generated::workflow(200);
    std::fs::write(root.join("workflows/generated/workflow.yaml"), &spec).expect("spec");
    std::fs::write(root.join("workflows/generated/scripts/check.js"), generated::SCRIPT).expect("script");
    let root = std::fs::canonicalize(&root).expect("root");
    let path = root.join("workflows/generated/workflow.yaml");
    let uri = lsp_types::Uri::from_str(&format!("file://{}", path.display())).expect("uri");

    let mut session = lsp::Session::new(Some(root.clone()));
    let opened = session.open(uri, 1, spec.clone()).expect("the document is in the workspace");
    let first = session.check();
    assert!(
        first.iter().all(|params| params
            .diagnostics
            .iter()
            .all(|finding| finding.severity != Some(lsp_types::DiagnosticSeverity::ERROR))),
        "the generated workflow is valid"
    );
    let target = spec.find("to: s1,").expect("a transition to s1") + 4;
    let mut broken = false;
    criterion.bench_function("lsp/edit-to-diagnostics/200-states", |bencher| {
        bencher.iter(|| {
            broken = !broken;
            if let Some(text) = session.text_mut(&opened) {
                text.replace_range(target..target + 2, if broken { "sX" } else { "s1" });
            }
            let published = session.check();
            assert_eq!(published.len(), 1);
            black_box(published)
        })
    });
    let _ = std::fs::remove_dir_all(&root);
}

criterion_group!(benches, bench);
criterion_main!(benches);
