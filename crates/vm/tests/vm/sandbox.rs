//! The QuickJS sandbox, driven the way the runtime drives it: the sandbox future and a
//! small host task that answers its `HostCall`s run side by side on one thread.
//!
//! The host answers `read_file` with `contents of <file_path>`, refuses `write_file` with
//! a `[workflow] BLOCKED: …` reason, never answers `slow_tool`, and answers anything else
//! with `{"tool": …, "args": …}` as text. Nothing asserts on wall-clock time.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use archmax_compiler::lower::script::module_bytecode;
use archmax_vm::sandbox::{Bridge, CodeStateRunner, EvalOutput, HostCall, Limits, Sandbox, SandboxError, camel_case};

type Log = Rc<RefCell<Vec<(String, Value)>>>;

const BLOCKED: &str = "[workflow] BLOCKED: write_file is not allowed in state 'work' (tool-blocked)";

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(10),
        memory_limit_bytes: 32 * 1024 * 1024,
        max_calls: Some(20),
        max_result_chars: 2_000,
        ..Limits::default()
    }
}

/// Short enough to keep the adversarial tests quick.
fn tight() -> Limits {
    Limits { timeout: Duration::from_millis(250), ..limits() }
}

fn bridge() -> Bridge {
    Bridge {
        visible: vec![
            "read_file".into(),
            "write_file".into(),
            "archmax_workflow_enrich-order".into(),
            "slow_tool".into(),
        ],
        callable: vec!["hidden_tool".into()],
    }
}

async fn serve(mut calls: UnboundedReceiver<HostCall>, log: Log) {
    let mut unanswered = Vec::new();
    while let Some(call) = calls.recv().await {
        log.borrow_mut().push((call.tool.clone(), call.args.clone()));
        let answer = match call.tool.as_str() {
            "read_file" => Ok(format!("contents of {}", call.args["file_path"].as_str().unwrap_or("?"))),
            "write_file" => Err(BLOCKED.to_string()),
            "slow_tool" => {
                unanswered.push(call.reply);
                continue;
            }
            _ => Ok(json!({ "tool": call.tool, "args": call.args }).to_string()),
        };
        let _ = call.reply.send(answer);
    }
}

/// One evaluation against the standard host: its outcome and the calls the host saw.
async fn eval_with(
    sandbox: &Sandbox,
    code: &str,
    bridge: &Bridge,
    args: Value,
) -> (Result<EvalOutput, SandboxError>, Vec<(String, Value)>) {
    let (host, calls) = unbounded_channel();
    let log = Log::default();
    let (outcome, ()) = tokio::join!(sandbox.eval(code, bridge, args, host), serve(calls, Rc::clone(&log)));
    let seen = log.take();
    (outcome, seen)
}

async fn eval(sandbox: &Sandbox, code: &str) -> Result<EvalOutput, SandboxError> {
    eval_with(sandbox, code, &bridge(), Value::Null).await.0
}

async fn value(sandbox: &Sandbox, code: &str) -> String {
    match eval(sandbox, code).await {
        Ok(output) => output.value,
        Err(error) => panic!("`{code}` failed: {error}"),
    }
}

async fn sandbox() -> Sandbox {
    Sandbox::new(limits()).await.expect("sandbox")
}

async fn run_module(
    limits: &Limits,
    source: &str,
    input: Value,
    bridge: &Bridge,
) -> (Result<archmax_vm::sandbox::ModuleOutput, SandboxError>, Vec<(String, Value)>) {
    let bytecode = module_bytecode("scripts/check.js", source).expect("compiles");
    let (host, calls) = unbounded_channel();
    let log = Log::default();
    let (outcome, ()) = tokio::join!(
        Sandbox::run_module(limits, "scripts/check.js", &bytecode, input, bridge, host),
        serve(calls, Rc::clone(&log))
    );
    let seen = log.take();
    (outcome, seen)
}

// ── evaluation basics ────────────────────────────────────────────────────────────────

#[tokio::test]
async fn the_last_expression_is_the_result() {
    let sandbox = sandbox().await;
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
    assert_eq!(value(&sandbox, "'plain text'").await, "plain text");
    assert_eq!(value(&sandbox, "undefined").await, "undefined");
    assert_eq!(value(&sandbox, "({ a: 1, b: [true, null, 'x'] })").await, r#"{"a":1,"b":[true,null,"x"]}"#);
    assert_eq!(value(&sandbox, "new Error('shown')").await, "Error: shown");
    assert_eq!(value(&sandbox, "const n = 3; n * 2").await, "6");
}

#[tokio::test]
async fn top_level_await_is_allowed() {
    let sandbox = sandbox().await;
    assert_eq!(value(&sandbox, "(await Promise.resolve(41)) + 1").await, "42");
    assert_eq!(value(&sandbox, "const r = await tools.readFile({ file_path: 'a.md' }); r").await, "contents of a.md");
}

#[tokio::test]
async fn the_repl_keeps_what_an_evaluation_defines() {
    let sandbox = sandbox().await;
    value(&sandbox, "function double(x) { return x * 2 }").await;
    assert_eq!(value(&sandbox, "double(21)").await, "42");
    value(&sandbox, "let kept = 5; var old = 6; globalThis.attached = 7").await;
    assert_eq!(value(&sandbox, "kept + old + attached").await, "18");
    value(&sandbox, "const helper = async () => (await tools.readFile({ file_path: 'h' })).length").await;
    assert_eq!(value(&sandbox, "await helper()").await, "13");
}

#[tokio::test]
async fn args_are_the_global_args() {
    let sandbox = sandbox().await;
    let args = json!({ "order": 7, "variables": { "count": 1, "trigger": "manual" } });
    let (outcome, _) =
        eval_with(&sandbox, "args.order + args.variables.count + args.variables.trigger", &bridge(), args).await;
    assert_eq!(outcome.expect("evaluates").value, "8manual");
    assert_eq!(value(&sandbox, "JSON.stringify(args)").await, "{}");
    // `args` can be neither reassigned nor shadowed.
    assert_eq!(value(&sandbox, "args = 5; typeof args").await, "object");
    assert!(matches!(eval(&sandbox, "let args = 1").await, Err(SandboxError::Thrown { .. })));
}

#[tokio::test]
async fn console_lines_are_captured() {
    let sandbox = sandbox().await;
    let output = eval(
        &sandbox,
        "console.log('a', 1, { b: [2] }); console.warn(undefined, null); console.error(new TypeError('bad')); 'done'",
    )
    .await
    .expect("evaluates");
    assert_eq!(output.value, "done");
    assert_eq!(output.console, ["a 1 {\"b\":[2]}", "undefined null", "TypeError: bad"]);
    assert!(!output.truncated);
    // Each evaluation returns its own lines.
    assert!(eval(&sandbox, "1").await.expect("evaluates").console.is_empty());
}

#[tokio::test]
async fn a_thrown_error_carries_its_message() {
    let sandbox = sandbox().await;
    match eval(&sandbox, "\n\nthrow new RangeError('boom')").await {
        Err(SandboxError::Thrown { message, stack }) => {
            assert_eq!(message, "RangeError: boom");
            assert!(stack.is_some_and(|stack| stack.contains("eval")), "the stack names the script");
        }
        other => panic!("expected a thrown error, got {other:?}"),
    }
    match eval(&sandbox, "throw { code: 7 }").await {
        Err(SandboxError::Thrown { message, .. }) => assert_eq!(message, r#"{"code":7}"#),
        other => panic!("expected a thrown value, got {other:?}"),
    }
    let error = eval(&sandbox, "throw new Error('boom')").await.expect_err("throws");
    assert_eq!(error.to_string(), "uncaught Error: boom");
}

// ── the tools bridge ────────────────────────────────────────────────────────────────

#[test]
fn tool_names_are_camel_cased_at_hyphens_and_underscores() {
    assert_eq!(camel_case("read_file"), "readFile");
    assert_eq!(camel_case("archmax_workflow_enrich-order"), "archmaxWorkflowEnrichOrder");
}

#[tokio::test]
async fn tools_show_the_visible_names_and_resolve_hidden_ones() {
    let sandbox = sandbox().await;
    assert_eq!(
        value(&sandbox, "Object.keys(tools)").await,
        r#"["readFile","writeFile","archmaxWorkflowEnrichOrder","slowTool"]"#
    );
    assert_eq!(
        value(&sandbox, "['readFile' in tools, 'hiddenTool' in tools, typeof tools.hiddenTool]").await,
        r#"[true,false,"function"]"#
    );
    assert_eq!(
        value(
            &sandbox,
            "[Object.keys({ ...tools }).length, Object.getOwnPropertyDescriptor(tools, 'readFile').enumerable, \
             Object.getOwnPropertyDescriptor(tools, 'hiddenTool'), JSON.stringify(tools)]"
        )
        .await,
        r#"[4,true,null,"{}"]"#
    );
    assert_eq!(
        value(&sandbox, "const seen = []; for (const name in tools) seen.push(name); seen.join(',')").await,
        "readFile,writeFile,archmaxWorkflowEnrichOrder,slowTool"
    );

    let (outcome, calls) = eval_with(
        &sandbox,
        "JSON.parse(await tools.archmaxWorkflowEnrichOrder({ order_id: 'A-1' })).tool + ' ' + await tools.hiddenTool()",
        &bridge(),
        Value::Null,
    )
    .await;
    assert_eq!(outcome.expect("evaluates").value, r#"archmax_workflow_enrich-order {"tool":"hidden_tool","args":{}}"#);
    assert_eq!(
        calls,
        [
            ("archmax_workflow_enrich-order".to_string(), json!({ "order_id": "A-1" })),
            ("hidden_tool".to_string(), json!({})),
        ]
    );
}

#[tokio::test]
async fn excluded_tools_are_absent_and_uncallable() {
    let sandbox = sandbox().await;
    let excluded = [
        "archmax_advance",
        "archmax_raise",
        "archmax_get_history",
        "archmax_get_variables",
        "archmax_set_variables",
        "archmax_reset",
        "archmax_wait",
        "archmax_eval",
        "archmax_run",
        "eval",
    ];
    let listed: Vec<String> = excluded.iter().map(|name| name.to_string()).collect();
    let bridge = Bridge { visible: listed.clone(), callable: listed };
    let code = "[Object.keys(tools).length, typeof tools.archmaxAdvance, typeof tools.eval, typeof tools.archmaxEval]";
    let (outcome, calls) = eval_with(&sandbox, code, &bridge, Value::Null).await;
    assert_eq!(outcome.expect("evaluates").value, r#"[0,"undefined","undefined","undefined"]"#);
    let (outcome, _) = eval_with(&sandbox, "await tools.archmaxAdvance({ to: 'done' })", &bridge, Value::Null).await;
    assert!(matches!(outcome, Err(SandboxError::Thrown { .. })), "calling an absent tool is a TypeError");
    assert!(calls.is_empty());

    // A code state reaches the control tools, never the sandbox or waiting ones.
    let source = "export default ({ tools }) => Object.keys(tools)";
    let (outcome, _) = run_module(&limits(), source, json!({}), &bridge).await;
    assert_eq!(
        outcome.expect("runs").value,
        json!(["archmaxAdvance", "archmaxRaise", "archmaxGetHistory", "archmaxGetVariables", "archmaxSetVariables"])
    );
}

#[tokio::test]
async fn tools_are_rescoped_at_every_evaluation() {
    let sandbox = sandbox().await;
    value(&sandbox, "globalThis.kept = tools").await;
    let narrow = Bridge::visible(["ls"]);
    let (outcome, calls) = eval_with(
        &sandbox,
        "[Object.keys(tools), typeof tools.readFile, kept === tools, Object.keys(kept), await kept.ls({ path: '.' })]",
        &narrow,
        Value::Null,
    )
    .await;
    assert_eq!(
        outcome.expect("evaluates").value,
        r#"[["ls"],"undefined",true,["ls"],"{\"tool\":\"ls\",\"args\":{\"path\":\".\"}}"]"#
    );
    assert_eq!(calls.len(), 1);
}

#[tokio::test]
async fn a_refusal_rejects_with_its_reason() {
    let sandbox = sandbox().await;
    let caught = value(
        &sandbox,
        "try { await tools.writeFile({ file_path: 'x.md', content: 'y' }); 'written' } \
         catch (error) { `${error instanceof Error} ${error.tool} ${error.message}` }",
    )
    .await;
    assert_eq!(caught, format!("true write_file {BLOCKED}"));
    match eval(&sandbox, "await tools.writeFile({ file_path: 'x.md', content: 'y' })").await {
        Err(SandboxError::Thrown { message, .. }) => assert_eq!(message, format!("Error: {BLOCKED}")),
        other => panic!("expected the refusal to propagate, got {other:?}"),
    }
}

#[tokio::test]
async fn promise_all_sends_every_call_before_any_answer() {
    let sandbox = sandbox().await;
    let (host, mut calls) = unbounded_channel::<HostCall>();
    let code = "const [a, b] = await Promise.all([tools.readFile({ file_path: 'a' }), tools.readFile({ file_path: 'b' })]); a + ' / ' + b";
    let answer_both = async move {
        let first = calls.recv().await.expect("the first call");
        let second = calls.recv().await.expect("the second call is in flight before the first is answered");
        for call in [first, second] {
            let text = format!("got {}", call.args["file_path"].as_str().unwrap_or("?"));
            call.reply.send(Ok(text)).expect("the script waits");
        }
    };
    let bridge = bridge();
    let (outcome, ()) = tokio::join!(sandbox.eval(code, &bridge, Value::Null, host), answer_both);
    assert_eq!(outcome.expect("evaluates").value, "got a / got b");
}

#[tokio::test]
async fn calls_past_max_calls_reject_and_send_nothing() {
    let sandbox = Sandbox::new(Limits { max_calls: Some(2), ..limits() }).await.expect("sandbox");
    let code = "for (const f of ['a', 'b', 'c']) await tools.readFile({ file_path: f })";
    let (outcome, calls) = eval_with(&sandbox, code, &bridge(), Value::Null).await;
    assert_eq!(outcome, Err(SandboxError::TooManyCalls(2)));
    assert_eq!(calls.len(), 2);
    // Counted per evaluation; a caught refusal is the script's to handle.
    let code = "const out = []; for (const f of ['a', 'b', 'c']) { try { out.push(await tools.readFile({ file_path: f })) } \
                catch (error) { out.push(error.message) } } out";
    let (outcome, calls) = eval_with(&sandbox, code, &bridge(), Value::Null).await;
    let shown = outcome.expect("evaluates").value;
    assert!(shown.contains("contents of b") && shown.contains("maxPtcCalls exceeded"), "{shown}");
    assert_eq!(calls.len(), 2);
}

// ── code states ─────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn a_module_default_export_gets_its_input_and_tools() {
    let source = r#"
import { ok } from "@archmax-ai/harness/sandbox";
export default async function ({ state, trigger, variables, tools }) {
  const text = await tools.readFile({ file_path: variables.path });
  await tools.archmaxAdvance({ to: "done", reason: `read ${text.length} characters` });
  console.log("moved on from", state);
  return { state, trigger, text, same: args.variables === variables };
}
"#;
    let bytecode = module_bytecode("scripts/check.js", &archmax_compiler::lower::script::strip_harness_imports(source))
        .expect("compiles");
    let bridge = Bridge::visible(["read_file", "archmax_advance"]);
    let input = json!({ "state": "check", "trigger": "manual", "variables": { "path": "orders.json" } });
    let (host, calls) = unbounded_channel();
    let log = Log::default();
    let limits = limits();
    let (outcome, ()) = tokio::join!(
        Sandbox::run_module(&limits, "scripts/check.js", &bytecode, input, &bridge, host),
        serve(calls, Rc::clone(&log))
    );
    let output = outcome.expect("runs");
    assert_eq!(
        output.value,
        json!({ "state": "check", "trigger": "manual", "text": "contents of orders.json", "same": true })
    );
    assert_eq!(output.console, ["moved on from check"]);
    assert_eq!(
        log.take(),
        [
            ("read_file".to_string(), json!({ "file_path": "orders.json" })),
            ("archmax_advance".to_string(), json!({ "to": "done", "reason": "read 23 characters" })),
        ]
    );
}

#[tokio::test]
async fn a_module_without_a_default_export_is_refused() {
    let (outcome, _) = run_module(&limits(), "export const helper = 1;", json!({}), &bridge()).await;
    assert_eq!(outcome, Err(SandboxError::NoDefaultExport));
    let (outcome, _) = run_module(&limits(), "export default 42;", json!({}), &bridge()).await;
    assert_eq!(outcome, Err(SandboxError::NoDefaultExport));
}

#[tokio::test]
async fn a_module_that_throws_fails_with_the_message() {
    let source = "export default async () => { await null; throw new TypeError('bad input') }";
    match run_module(&limits(), source, json!({}), &bridge()).await.0 {
        Err(SandboxError::Thrown { message, stack }) => {
            assert_eq!(message, "TypeError: bad input");
            assert!(stack.is_some());
        }
        other => panic!("expected a thrown error, got {other:?}"),
    }
    let (outcome, _) = run_module(&limits(), "throw new Error('at load')", json!({}), &bridge()).await;
    assert!(matches!(outcome, Err(SandboxError::Thrown { message, .. }) if message == "Error: at load"));
}

#[tokio::test]
async fn a_module_that_runs_too_long_times_out() {
    let source = "export default async ({ tools }) => { await tools.readFile({ file_path: 'a' }); for (;;) {} }";
    let (outcome, calls) = run_module(&tight(), source, json!({}), &bridge()).await;
    assert_eq!(outcome, Err(SandboxError::Timeout(tight().timeout)));
    assert_eq!(calls.len(), 1);
}

#[tokio::test]
async fn a_warm_runner_calls_the_default_export_again() {
    let source = "export default async ({ variables, tools }) => \
                  JSON.parse(await tools.archmaxAdvance({ to: variables.to })).args.to";
    let bytecode = module_bytecode("scripts/route.js", source).expect("compiles");
    let runner = CodeStateRunner::new(limits(), "scripts/route.js", &bytecode, &Bridge::visible(["archmax_advance"]))
        .await
        .expect("loads");
    for to in ["left", "right"] {
        let (host, calls) = unbounded_channel();
        let log = Log::default();
        let (outcome, ()) =
            tokio::join!(runner.run(json!({ "variables": { "to": to } }), host), serve(calls, Rc::clone(&log)));
        assert_eq!(outcome.expect("runs").value, json!(to));
        assert_eq!(log.take().len(), 1);
    }
    // A runner whose bridge lacks the tool fails the run with the script's TypeError.
    let runner = CodeStateRunner::new(tight(), "scripts/route.js", &bytecode, &Bridge::visible(["slow_tool"]))
        .await
        .expect("loads");
    let (host, calls) = unbounded_channel();
    let (outcome, ()) =
        tokio::join!(runner.run(json!({ "variables": { "to": "x" } }), host), serve(calls, Log::default()));
    assert!(matches!(outcome, Err(SandboxError::Thrown { .. })), "archmaxAdvance is not on this bridge: {outcome:?}");
}

// ── limits and hostile scripts ──────────────────────────────────────────────────────

#[tokio::test]
async fn an_infinite_loop_times_out_and_the_repl_survives() {
    let sandbox = Sandbox::new(tight()).await.expect("sandbox");
    value(&sandbox, "const survivor = 'still here'").await;
    assert_eq!(eval(&sandbox, "while (true) {}").await, Err(SandboxError::Timeout(tight().timeout)));
    assert_eq!(
        eval(&sandbox, "try { while (true) {} } catch { 'caught' }").await,
        Err(SandboxError::Timeout(tight().timeout))
    );
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
    assert_eq!(value(&sandbox, "survivor").await, "still here");
}

#[tokio::test]
async fn a_loop_after_an_awaited_call_times_out() {
    let sandbox = Sandbox::new(tight()).await.expect("sandbox");
    let (outcome, calls) =
        eval_with(&sandbox, "await tools.readFile({ file_path: 'a' }); while (true) {}", &bridge(), Value::Null).await;
    assert_eq!(outcome, Err(SandboxError::Timeout(tight().timeout)));
    assert_eq!(calls.len(), 1);
    // A microtask loop is stopped the same way.
    let outcome = eval(&sandbox, "for (;;) await null").await;
    assert_eq!(outcome, Err(SandboxError::Timeout(tight().timeout)));
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
}

#[tokio::test]
async fn a_call_never_answered_times_out() {
    let sandbox = Sandbox::new(tight()).await.expect("sandbox");
    let (outcome, calls) = eval_with(&sandbox, "await tools.slowTool({})", &bridge(), Value::Null).await;
    assert_eq!(outcome, Err(SandboxError::Timeout(tight().timeout)));
    assert_eq!(calls.len(), 1);
    // A call left running is cancelled when its evaluation ends; the next one is clean.
    let (outcome, _) = eval_with(&sandbox, "tools.slowTool({}); 'left behind'", &bridge(), Value::Null).await;
    assert_eq!(outcome.expect("evaluates").value, "left behind");
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
    // A cold code state left waiting is torn down with its runtime.
    let (outcome, calls) =
        run_module(&tight(), "export default ({ tools }) => tools.slowTool()", json!({}), &bridge()).await;
    assert_eq!(outcome, Err(SandboxError::Timeout(tight().timeout)));
    assert_eq!(calls.len(), 1);
}

#[tokio::test]
async fn an_evaluation_dropped_half_way_leaves_a_usable_sandbox() {
    let sandbox = sandbox().await;
    value(&sandbox, "globalThis.before = 1").await;
    let bridge = bridge();
    let (host, mut calls) = unbounded_channel::<HostCall>();
    let call = tokio::select! {
        _ = sandbox.eval("await tools.slowTool({})", &bridge, Value::Null, host) => panic!("the call is never answered"),
        call = calls.recv() => call.expect("the call arrives"),
    };
    // The evaluation future is gone; the REPL it left half-way is rebuilt.
    drop(call);
    assert_eq!(value(&sandbox, "typeof before").await, "undefined");
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
}

#[tokio::test]
async fn a_memory_bomb_runs_out_of_memory_and_the_sandbox_recovers() {
    let sandbox = sandbox().await;
    assert_eq!(
        eval(&sandbox, "let a = []; while (true) a.push('x'.repeat(1e6))").await,
        Err(SandboxError::OutOfMemory)
    );
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
    assert_eq!(
        eval(&sandbox, "(() => { const b = []; while (true) b.push('y'.repeat(1e6) + b.length) })()").await,
        Err(SandboxError::OutOfMemory)
    );
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
}

#[tokio::test]
async fn deep_recursion_overflows_the_stack() {
    let sandbox = sandbox().await;
    assert_eq!(eval(&sandbox, "function f() { return f() } f()").await, Err(SandboxError::StackOverflow));
    assert_eq!(value(&sandbox, "1 + 1").await, "2");
}

#[tokio::test]
async fn floods_are_truncated() {
    let sandbox = sandbox().await;
    let max = limits().max_result_chars;
    let output = eval(&sandbox, "'x'.repeat(1e7)").await.expect("evaluates");
    assert!(output.truncated);
    assert!(output.value.starts_with(&"x".repeat(max)));
    assert!(output.value.chars().count() < max + 100, "cut near the limit");
    assert!(output.value.contains("truncated: 10000000 characters"));

    let output = eval(&sandbox, "Array.from({ length: 1e5 }, (_, i) => i)").await.expect("evaluates");
    assert!(output.truncated);
    assert!(output.value.chars().count() < max + 100);

    let output = eval(&sandbox, "for (let i = 0; i < 1e5; i++) console.log('line', i); 'ok'").await.expect("evaluates");
    assert_eq!(output.value, "ok");
    assert!(output.truncated);
    let total: usize = output.console.iter().map(|line| line.chars().count()).sum();
    assert!(total < max + 100, "console capped: {total}");
    assert!(output.console.last().is_some_and(|line| line.contains("console output truncated")));
}

#[tokio::test]
async fn there_is_nothing_outside_but_tools() {
    let sandbox = sandbox().await;
    assert_eq!(
        value(&sandbox, "[typeof require, typeof process, typeof fetch, typeof std, typeof os, typeof setTimeout, typeof XMLHttpRequest]")
            .await,
        r#"["undefined","undefined","undefined","undefined","undefined","undefined","undefined"]"#
    );
    assert_eq!(eval(&sandbox, "require('fs')").await, Err(SandboxError::ForbiddenImport("fs".into())));
    assert_eq!(eval(&sandbox, "await import('fs')").await, Err(SandboxError::ForbiddenImport("fs".into())));
    assert_eq!(eval(&sandbox, "import fs from 'fs';\nfs").await, Err(SandboxError::ForbiddenImport("fs".into())));
    // A specifier computed at run time reaches the loader, which refuses it by name.
    assert_eq!(
        eval(&sandbox, "const name = ['node', 'fs'].join(':'); await import(name)").await,
        Err(SandboxError::ForbiddenImport("node:fs".into()))
    );
    let caught = value(&sandbox, "try { await import(['o', 's'].join('')) } catch (error) { error.message }").await;
    assert!(caught.contains("'os'"), "{caught}");
    // Typed harness imports are blanked, not refused.
    assert_eq!(value(&sandbox, "import { ok } from \"@archmax-ai/harness/sandbox\";\n1 + 1").await, "2");
    // A module cannot be compiled with a static import; a dynamic one is refused when it runs.
    let source = "export default async () => await import(['f', 's'].join(''))";
    let (outcome, _) = run_module(&limits(), source, json!({}), &bridge()).await;
    assert_eq!(outcome, Err(SandboxError::ForbiddenImport("fs".into())));
}

#[tokio::test]
async fn prototype_tampering_neither_escapes_nor_changes_the_bridge() {
    let sandbox = sandbox().await;
    let tamper = r#"
JSON.stringify = () => '{"file_path":"secrets/forged"}';
JSON.parse = () => ({ forged: true });
Object.prototype.toJSON = function () { return { file_path: "secrets/forged" }; };
Object.prototype.file_path = "secrets/inherited";
Object.defineProperty(Object.prototype, "injected", { get() { return "x"; }, enumerable: true, configurable: true });
Object.defineProperty(Array.prototype, "0", { set(v) { globalThis.leaked = v; }, get() { return "forged"; }, configurable: true });
Object.defineProperty(Error.prototype, "message", { set(v) { globalThis.leakedMessage = v; }, configurable: true });
Function.prototype.call = function () { throw new Error("call hijacked"); };
Function.prototype.apply = function () { throw new Error("apply hijacked"); };
Function.prototype.bind = function () { throw new Error("bind hijacked"); };
Promise.prototype.then = function () { throw new Error("then hijacked"); };
Array.prototype.push = function () { throw new Error("push hijacked"); };
Object.keys = () => ["forged"];
Reflect.apply = () => { throw new Error("apply hijacked"); };
Proxy = function () { throw new Error("proxy hijacked"); };
tools = { readFile: async () => "forged" };
globalThis.tools = { readFile: async () => "forged" };
delete globalThis.tools;
'tampered'
"#;
    assert_eq!(value(&sandbox, tamper).await, "tampered");
    let (outcome, calls) = eval_with(
        &sandbox,
        "const text = await tools.readFile({ file_path: 'notes/a.md', nested: { list: [1, { deep: true }] } }); text",
        &bridge(),
        Value::Null,
    )
    .await;
    assert_eq!(outcome.expect("evaluates").value, "contents of notes/a.md");
    assert_eq!(
        calls,
        [("read_file".to_string(), json!({ "file_path": "notes/a.md", "nested": { "list": [1, { "deep": true }] } }))]
    );

    // A refusal still rejects with the reason, read here without Error.prototype.message.
    let code = "try { await tools.writeFile({ file_path: 'x' }) } catch (error) { Object.getOwnPropertyDescriptor(error, 'message').value }";
    assert_eq!(value(&sandbox, code).await, BLOCKED);

    // Nothing private is reachable: no extra globals, the tool functions are native, and
    // a stack trace taken inside a tool call (from a getter the marshalling runs) holds
    // only the script's own functions.
    let code = r#"
const globals = Object.getOwnPropertyNames(globalThis).filter((name) => /host|bridge|archmax|rescope|setArgs|__/i.test(name));
let captured = [];
Error.prepareStackTrace = (error, sites) => { captured = sites.map((site) => site.getFunction && site.getFunction()); return ""; };
const sneaky = { get file_path() { new Error().stack; return "b"; } };
await tools.readFile(sneaky);
Error.prepareStackTrace = undefined;
const named = captured.map((fn) => typeof fn === "function" ? fn.name : String(fn));
[globals.length, captured.length > 0, named.some((name) => /readFile|rescope|setArgs|get$|ownKeys/.test(name)), typeof tools.readFile.prototype]
"#;
    let (outcome, calls) = eval_with(&sandbox, code, &bridge(), Value::Null).await;
    assert_eq!(outcome.expect("evaluates").value, r#"[0,true,false,"undefined"]"#);
    assert_eq!(calls, [("read_file".to_string(), json!({ "file_path": "b" }))]);

    // `tools` cannot be shadowed either.
    assert!(matches!(eval(&sandbox, "let tools = {}").await, Err(SandboxError::Thrown { .. })));
}

#[tokio::test]
async fn bad_arguments_reject_without_a_call() {
    let sandbox = sandbox().await;
    let code = r#"
const cyclic = { file_path: "a" }; cyclic.self = cyclic;
const results = [];
for (const args of ["text", [1], cyclic, { n: 10n }]) {
  try { await tools.readFile(args); results.push("sent") } catch (error) { results.push(error.message) }
}
results
"#;
    let (outcome, calls) = eval_with(&sandbox, code, &bridge(), Value::Null).await;
    let shown = outcome.expect("evaluates").value;
    assert!(shown.contains("takes one object argument"), "{shown}");
    assert!(shown.contains("refers to itself"), "{shown}");
    assert!(shown.contains("BigInt"), "{shown}");
    assert!(calls.is_empty());
}

#[tokio::test]
async fn a_dropped_reply_rejects_the_call() {
    let sandbox = sandbox().await;
    let (host, mut calls) = unbounded_channel::<HostCall>();
    let drop_it = async move {
        let call = calls.recv().await.expect("a call");
        drop(call.reply);
    };
    let code = "try { await tools.readFile({}) } catch (error) { error.message }";
    let bridge = bridge();
    let (outcome, ()) = tokio::join!(sandbox.eval(code, &bridge, Value::Null, host), drop_it);
    assert_eq!(outcome.expect("evaluates").value, "`read_file` ended without an answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_run_on_a_multi_threaded_runtime() {
    let sandbox = std::sync::Arc::new(sandbox().await);
    for round in 0..3 {
        let (host, mut calls) = unbounded_channel::<HostCall>();
        let answering = tokio::spawn(async move {
            let mut seen = 0;
            while let Some(call) = calls.recv().await {
                seen += 1;
                let _ = call.reply.send(Ok(format!("answer {}", call.args["n"])));
            }
            seen
        });
        let evaluating = tokio::spawn({
            let sandbox = std::sync::Arc::clone(&sandbox);
            async move {
                let code =
                    "{ const all = await Promise.all([1, 2, 3].map((n) => tools.readFile({ n }))); all.join(', ') }";
                sandbox.eval(code, &bridge(), Value::Null, host).await
            }
        });
        let output = evaluating.await.expect("joins").expect("evaluates");
        assert_eq!(output.value, "answer 1, answer 2, answer 3", "round {round}");
        assert_eq!(answering.await.expect("joins"), 3);
    }
}

#[test]
fn the_futures_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let sandbox = sandbox().await;
        let (host, _calls) = unbounded_channel();
        let (empty, limits) = (Bridge::default(), limits());
        let future = sandbox.eval("1", &empty, Value::Null, host);
        send(&future);
        drop(future);
        let (host, _calls) = unbounded_channel();
        let future = Sandbox::run_module(&limits, "m", &[], json!({}), &empty, host);
        send(&future);
    });
    fn sync<T: Send + Sync>() {}
    sync::<Sandbox>();
    sync::<CodeStateRunner>();
}
