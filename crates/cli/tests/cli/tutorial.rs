//! The book tutorial's last step, as a reader follows it: the finished expense workspace
//! (`golden/runs/tutorial-5-cases`) with the `archmax.toml` the page includes
//! (`docs/src/tutorial/serve/archmax.toml`), served on the large claim's tape, a claim
//! submitted and approved over HTTP with a token, and the payment made for real by the
//! tutorial's payment server (`archmax-payments-mcp`, the `archmax-example-payments`
//! package, built beside `archmax` by `cargo test --workspace`).

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::serving::Served;
use crate::support::{copy_dir, repository, scratch};

const TOKEN: &str = "tutorial-token-0123456789abcdef";

#[test]
fn the_served_tutorial_workflow_pays_through_the_real_payment_server() {
    let payments = Path::new(env!("CARGO_BIN_EXE_archmax")).with_file_name("archmax-payments-mcp");
    assert!(
        payments.is_file(),
        "{} is missing: the tutorial's payment server is another package; run the whole suite \
         (`cargo test --workspace`) or build it first (`cargo build -p archmax-example-payments`)",
        payments.display()
    );
    let root = scratch("tutorial-6-serve");
    let _ = fs::remove_dir_all(&root);
    copy_dir(&repository().join("golden/runs/tutorial-5-cases/workspace"), &root);
    fs::copy(repository().join("docs/src/tutorial/serve/archmax.toml"), root.join("archmax.toml"))
        .expect("the page's archmax.toml");

    let served = Served::spawn(
        &root,
        &["--tape", "workflows/expense/tests/large-expense-needs-a-manager.tape.yaml"],
        &[("ARCHMAX_SERVE_TOKEN", TOKEN)],
    );
    let claim = json!({"sessionId": "e9", "message": "Receipt: Hotel Adler, Munich, 2 nights, total 142.50 EUR."});
    let (status, session) = served.request("POST", "/v1/workflows/expense/sessions?wait=30", Some(TOKEN), Some(&claim));
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["status"], "awaiting_decision", "{session}");
    assert!(!root.join("payments.jsonl").exists(), "nothing is paid before the manager decides");

    let decision = json!({"to": "pay", "comment": "Conference hotel, agreed in advance."});
    let (status, session) = served.request("POST", "/v1/sessions/e9/decide?wait=30", Some(TOKEN), Some(&decision));
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["status"], "completed", "{session}");

    let (status, transcript) = served.request("GET", "/v1/sessions/e9/transcript", Some(TOKEN), None);
    assert_eq!(status, 200, "{transcript}");
    let text = transcript.to_string();
    assert!(text.contains("PAY-000001"), "the transcript shows the payment server's answer: {text}");
    assert!(!text.contains("provides no such tool"), "the call reached the server: {text}");

    let ledger = fs::read_to_string(root.join("payments.jsonl")).expect("the payment server's ledger");
    let lines: Vec<Value> =
        ledger.lines().map(|line| serde_json::from_str(line).expect("a payment per line")).collect();
    assert_eq!(lines.len(), 1, "exactly one payment: {ledger}");
    assert_eq!((lines[0]["payment"].as_str(), lines[0]["amount"].as_f64()), (Some("PAY-000001"), Some(142.5)));
    served.stop();
    let _ = fs::remove_dir_all(&root);
}
