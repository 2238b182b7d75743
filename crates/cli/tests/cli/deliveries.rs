//! `archmax deliver` writes only what the delivered trigger declares: a member outside
//! its `requires` is refused by name and nothing changes, so a locked variable set at the
//! start is replaced only by a trigger that declares it; and `--workflow` cannot tell a
//! session of another workflow from one that does not exist.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Run, archmax, scratch};

const ORDERS: &str = r#"title: Orders
instructions: You follow one order until its parcel arrives.
states:
  follow:
    triggers:
      manual:
        description: Follow one order.
        requires:
          - { name: order_id, type: string }
      carrier_update:
        description: The carrier reports a scan of the order's parcel.
        session: parcel.order
        requires: [scan]
      order_fix:
        description: Support corrects the order number.
        requires:
          - { name: order_id, type: string }
    instructions: Wait for the carrier's scan, then say where the parcel is.
"#;

const WAITER: &str = r#"title: Waiter
instructions: You wait for a payment to arrive.
states:
  wait:
    triggers:
      manual:
        description: Wait for one payment.
    instructions: Wait for the payment, then thank the customer.
"#;

const WAIT_TAPE: &str = r#"
- { state: follow, text: "I will wait for the carrier's scan.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: no scan yet } }] }
- { state: wait, text: "I will wait for the payment.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: no payment yet } }] }
"#;

const DONE_TAPE: &str = r#"
- { state: follow, text: "Your parcel has arrived." }
"#;

/// A workspace holding the orders and waiter workflows and their tapes.
fn workspace(label: &str) -> PathBuf {
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    for (path, text) in [
        ("workflows/orders/workflow.yaml", ORDERS),
        ("workflows/waiter/workflow.yaml", WAITER),
        ("wait.yaml", WAIT_TAPE),
        ("done.yaml", DONE_TAPE),
    ] {
        let path = root.join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
        fs::write(path, text).expect("write");
    }
    root
}

/// Starts order session `id` for order `o-1`; it parks waiting for the carrier.
fn start_order(root: &Path, id: &str) {
    let run = archmax(
        root,
        &[
            "run",
            "orders",
            "Where is my parcel?",
            "--session",
            id,
            "--variables",
            r#"{"order_id":"o-1"}"#,
            "--tape",
            "wait.yaml",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

fn deliver(root: &Path, id: &str, trigger: &[&str], variables: &str) -> Run {
    let args =
        [&["deliver", id, "--trigger"][..], trigger, &["--variables", variables, "--tape", "done.yaml"]].concat();
    archmax(root, &args)
}

fn session(root: &Path, id: &str) -> Value {
    let shown = archmax(root, &["sessions", id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    serde_json::from_str(&shown.stdout).expect("the session as JSON")
}

#[test]
fn a_delivery_carrying_members_its_trigger_does_not_declare_is_refused_naming_each() {
    let root = workspace("deliver-undeclared-members");
    start_order(&root, "s1");
    let smuggled = r#"{"scan":{"status":"delivered"},"order_id":"o-666","note":"x"}"#;
    let refused = deliver(&root, "s1", &["carrier_update"], smuggled);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("'order_id'") && refused.stderr.contains("'note'"),
        "each undeclared member is named: {}",
        refused.stderr
    );
    // An undeclared trigger declares nothing, so it carries nothing.
    let refused = deliver(&root, "s1", &["paid", "--undeclared"], r#"{"amount":40}"#);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("'amount'"), "{}", refused.stderr);

    let held = session(&root, "s1");
    assert_eq!(held["status"], "awaiting_input", "{held}");
    assert_eq!(held["variables"]["order_id"]["value"], "o-1", "{held}");
    for absent in ["scan", "note", "amount"] {
        assert!(held["variables"].get(absent).is_none(), "a refused delivery writes nothing: {held}");
    }
    let delivered = deliver(&root, "s1", &["carrier_update"], r#"{"scan":{"status":"delivered"}}"#);
    assert_eq!(delivered.code, 0, "{}", delivered.stderr);
    assert_eq!(session(&root, "s1")["status"], "completed");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_locked_variable_set_at_the_start_is_replaced_only_by_a_trigger_that_declares_it() {
    let root = workspace("deliver-locked-replaced");
    start_order(&root, "s1");
    for trigger in [&["carrier_update"][..], &["rescan", "--undeclared"][..]] {
        let refused = deliver(&root, "s1", trigger, r#"{"scan":{},"order_id":"o-666"}"#);
        assert_eq!(refused.code, 1, "{trigger:?}: {}", refused.stderr);
        assert!(refused.stderr.contains("'order_id'"), "{}", refused.stderr);
        assert_eq!(session(&root, "s1")["variables"]["order_id"]["value"], "o-1");
    }
    let fixed = deliver(&root, "s1", &["order_fix"], r#"{"order_id":"o-2"}"#);
    assert_eq!(fixed.code, 0, "{}", fixed.stderr);
    let order_id = &session(&root, "s1")["variables"]["order_id"];
    assert_eq!((order_id["value"].as_str(), order_id["locked"].as_bool()), (Some("o-2"), Some(true)));
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn deliver_with_workflow_answers_alike_for_an_unknown_session_and_another_workflows() {
    let root = workspace("deliver-other-workflow");
    let waiting =
        archmax(&root, &["run", "waiter", "Tell me when it is paid.", "--session", "w1", "--tape", "wait.yaml"]);
    assert_eq!(waiting.code, 0, "{}", waiting.stderr);
    let attempt = |id: &str| deliver(&root, id, &["carrier_update", "--workflow", "orders"], r#"{"scan":{}}"#);
    let (other, unknown) = (attempt("w1"), attempt("w2"));
    assert_eq!(other.code, 1, "{}", other.stderr);
    assert_eq!(unknown.code, other.code);
    assert_eq!(other.stdout, unknown.stdout);
    assert_eq!(other.stderr.replace("w1", "<id>"), unknown.stderr.replace("w2", "<id>"), "nothing tells them apart");
    assert!(!other.stderr.contains("waiter"), "the other workflow is not named: {}", other.stderr);
    assert_eq!(session(&root, "w1")["status"], "awaiting_input");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_routing_path_lets_a_delivery_write_only_its_leaf_never_the_whole_locked_object() {
    let root = workspace("deliver-routing-leaf");
    let seeds = r#"{"order_id":"o-1","parcel":{"order":"s1","carrier":"dhl"}}"#;
    let run = archmax(
        &root,
        &["run", "orders", "Where is my parcel?", "--session", "s1", "--variables", seeds, "--tape", "wait.yaml"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let screened = serde_json::json!({ "order": "s1", "carrier": "dhl" });

    let widened = r#"{"scan":{},"parcel":{"order":"s1","carrier":"evil"}}"#;
    let refused = deliver(&root, "s1", &["carrier_update"], widened);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("`parcel.carrier`"), "the stray member is named: {}", refused.stderr);
    let held = session(&root, "s1");
    assert_eq!(held["status"], "awaiting_input", "{held}");
    assert_eq!(held["variables"]["parcel"]["value"], screened, "{held}");

    let delivered = deliver(&root, "s1", &["carrier_update"], r#"{"scan":{},"parcel":{"order":"s1"}}"#);
    assert_eq!(delivered.code, 0, "{}", delivered.stderr);
    let parcel = &session(&root, "s1")["variables"]["parcel"];
    assert_eq!((&parcel["value"], parcel["locked"].as_bool()), (&screened, Some(true)));
    let _ = fs::remove_dir_all(&root);
}
