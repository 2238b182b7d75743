//! Model providers end to end: `archmax run` on a workspace whose `archmax.toml` routes its
//! model id to an `anthropic` provider, served by the in-suite Messages server on
//! loopback; `archmax validate` judging the routes against the environment.

use std::process::Command;

use archmax_vm::model::anthropic::test_server::{Answer, MessagesServer};
use serde_json::{Value, json};

use crate::support::{copy_dir, repository, scratch};

/// `archmax` in `root` with a fixed clock and none of the environment's endpoint.
fn command(root: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
    command
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")
        .env_remove("ARCHMAX_API_BASE_URL")
        .env_remove("ARCHMAX_API_KEY")
        .env_remove("ARCHMAX_STREAMING")
        .env_remove("ARCHMAX_PROMPT_CACHE")
        .env_remove("ARCHMAX_PROMPT_CACHE_TTL")
        .env_remove("ARCHMAX_TRUSTED_KEYS");
    command
}

/// The parcel workspace, its model routed to a Claude provider at `base_url`.
fn workspace(label: &str, base_url: &str) -> std::path::PathBuf {
    let root = scratch(label);
    copy_dir(&repository().join("golden/runs/wait-deliver/workspace"), &root);
    let settings = format!(
        "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{base_url}\"\napi_key_env = \"ARCHMAX_SUITE_CLAUDE_KEY\"\n\n\
         [models.\"claude-sonnet\"]\nprovider = \"claude\"\nname = \"claude-sonnet-4-5\"\n"
    );
    std::fs::write(root.join("archmax.toml"), settings).expect("archmax.toml");
    root
}

#[test]
fn a_workflow_runs_on_claude_through_the_anthropic_provider() {
    let server = MessagesServer::start(vec![
        Answer::tool_use("", "toolu_read", "read_file", json!({ "file_path": "notes.md" })),
        Answer::tool_use(
            "The carrier says it arrived.",
            "toolu_adv",
            "archmax_advance",
            json!({ "to": "delivered", "reason": "the scan says delivered" }),
        ),
        Answer::text("Enjoy your table!"),
    ])
    .expect("a loopback server");
    let root = workspace("providers-claude", &server.base_url);
    let output = command(&root, &["run", "parcel-follow", "Has it arrived?", "--events", "events.jsonl"])
        .env("ARCHMAX_SUITE_CLAUDE_KEY", "sk-ant-suite")
        .env("ARCHMAX_MODEL", "claude-sonnet")
        .output()
        .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "The carrier says it arrived.\n\nEnjoy your table!\n");
    assert!(stderr.contains("→ delivered"), "{stderr}");

    let received = server.received();
    assert_eq!(received.len(), 3);
    for request in &received {
        assert!(request.problems.is_empty(), "the server found {:?}", request.problems);
        assert_eq!(request.header("x-api-key"), Some("sk-ant-suite"));
        assert_eq!(request.body["model"], "claude-sonnet-4-5", "the provider's own name is sent");
        assert_eq!(request.body["stream"], true);
        // The static prefix carries the breakpoint; the volatile block does not.
        let system = request.body["system"].as_array().cloned().unwrap_or_default();
        assert_eq!(system.len(), 2, "{system:?}");
        assert_eq!(system[0]["cache_control"], json!({ "type": "ephemeral", "ttl": "5m" }));
        assert!(system[1].get("cache_control").is_none());
        let tools = request.body["tools"].as_array().cloned().unwrap_or_default();
        let marked: Vec<usize> = tools
            .iter()
            .enumerate()
            .filter(|(_, tool)| tool.get("cache_control").is_some())
            .map(|(at, _)| at)
            .collect();
        assert_eq!(marked, [tools.len() - 1], "one breakpoint, on the last tool");
    }
    // The third call answers the second's tool_use with a tool_result.
    let turns = received[2].body["messages"].as_array().cloned().unwrap_or_default();
    let results: Vec<&Value> = turns
        .iter()
        .filter(|turn| turn["role"] == "user")
        .flat_map(|turn| turn["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    assert!(results.iter().any(|block| block["tool_use_id"] == "toolu_adv"), "{turns:?}");

    // The usage the events carry: the prefix written on the first call, read on the
    // second in the same state, written again for the next state's prefix.
    let events = std::fs::read_to_string(root.join("events.jsonl")).expect("events");
    let usages: Vec<Value> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "model-usage")
        .collect();
    assert_eq!(usages.len(), 3, "{events}");
    let counts: Vec<(bool, bool)> = usages
        .iter()
        .map(|usage| (usage["cacheCreationTokens"].as_u64() > Some(0), usage["cacheReadTokens"].as_u64() > Some(0)))
        .collect();
    assert_eq!(counts, [(true, false), (false, true), (true, false)], "{usages:?}");
    assert!(usages.iter().all(|usage| usage["model"] == "claude-sonnet-4-5"), "{usages:?}");
}

#[test]
fn a_missing_provider_key_refuses_the_run_and_validate_names_it_and_the_unrouted_model() {
    let server = MessagesServer::start(Vec::new()).expect("a loopback server");
    let root = workspace("providers-no-key", &server.base_url);
    let output = command(&root, &["run", "parcel-follow", "Has it arrived?"])
        .env_remove("ARCHMAX_SUITE_CLAUDE_KEY")
        .env("ARCHMAX_MODEL", "claude-sonnet")
        .output()
        .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("provider `claude`") && stderr.contains("ARCHMAX_SUITE_CLAUDE_KEY"), "{stderr}");
    assert!(server.received().is_empty(), "nothing was sent");

    let workflow = root.join("workflows/parcel-follow/workflow.yaml");
    let text = std::fs::read_to_string(&workflow).expect("workflow");
    std::fs::write(&workflow, format!("settings:\n  model: gpt-4.1\n{text}")).expect("workflow");
    let output = command(&root, &["validate", "--format", "json"])
        .env_remove("ARCHMAX_SUITE_CLAUDE_KEY")
        .output()
        .expect("validate");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let codes: Vec<&str> = report["workflows"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|workflow| workflow["diagnostics"].as_array().into_iter().flatten())
        .filter_map(|diagnostic| diagnostic["code"].as_str())
        .collect();
    assert_eq!(codes, ["AMX0019", "AMX0018"], "{report}");
    assert_eq!(output.status.code(), Some(0), "both are warnings");
}

#[test]
fn a_session_on_claude_is_recorded_as_a_tape_that_replays_offline() {
    let server = MessagesServer::start(vec![
        Answer::tool_use(
            "The carrier says it arrived.",
            "toolu_adv",
            "archmax_advance",
            json!({ "to": "delivered", "reason": "the scan says delivered" }),
        ),
        Answer::text("Enjoy your table!"),
    ])
    .expect("a loopback server");
    let root = workspace("providers-record", &server.base_url);
    let live = command(&root, &["run", "parcel-follow", "Has it arrived?", "--record", "claude.tape.yaml"])
        .env("ARCHMAX_SUITE_CLAUDE_KEY", "sk-ant-suite")
        .env("ARCHMAX_MODEL", "claude-sonnet")
        .output()
        .expect("archmax runs");
    assert!(live.status.success(), "{}", String::from_utf8_lossy(&live.stderr));
    assert_eq!(server.received().len(), 2);
    let tape = std::fs::read_to_string(root.join("claude.tape.yaml")).expect("the tape is written");
    assert!(tape.contains("archmax_advance") && tape.contains("cache_write"), "{tape}");

    // Offline: no key, no server; the tape answers.
    let replayed = command(&root, &["run", "parcel-follow", "Has it arrived?", "--tape", "claude.tape.yaml"])
        .env_remove("ARCHMAX_SUITE_CLAUDE_KEY")
        .env("ARCHMAX_MODEL", "claude-sonnet")
        .output()
        .expect("archmax runs");
    assert!(replayed.status.success(), "{}", String::from_utf8_lossy(&replayed.stderr));
    assert_eq!(replayed.stdout, live.stdout);
    assert_eq!(server.received().len(), 2, "the replay sent nothing");
}

/// A chat-completions endpoint on loopback that answers each request, whole, with the
/// next of `answers` (an assistant message and the usage to report), as `gpt-4.1-mini`'s
/// dated snapshot.
fn chat_completions(answers: Vec<(Value, Value)>) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream.try_clone().expect("the stream clones"));
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let (message, usage) = answers.next().unwrap_or((json!({ "role": "assistant", "content": "" }), json!({})));
            let finish = if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" };
            let answer = json!({
                "id": "chatcmpl-suite", "object": "chat.completion", "created": 1_767_605_400,
                "model": "gpt-4.1-mini-2025-04-14",
                "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
                "usage": usage,
            })
            .to_string();
            let mut writer = stream;
            let _ = write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    format!("http://{address}/v1")
}

#[test]
fn a_workflow_on_two_models_of_two_providers_costs_each_call_at_its_own_models_price() {
    let openai = chat_completions(vec![(
        json!({ "role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": { "name": "archmax_advance", "arguments": "{\"to\":\"review\",\"reason\":\"drafted\"}" },
        }] }),
        json!({ "prompt_tokens": 12_000, "completion_tokens": 300, "prompt_tokens_details": { "cached_tokens": 8_000 } }),
    )]);
    let claude = MessagesServer::start(vec![Answer::text("The draft reads well.")]).expect("a loopback server");
    let root = scratch("providers-two-prices");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("workflows/letters")).expect("workspace");
    std::fs::write(
        root.join("workflows/letters/workflow.yaml"),
        "title: Letters\ninstructions: You write short letters.\nstates:\n  draft:\n    model: drafter\n    triggers:\n      manual:\n        description: Draft one letter.\n    instructions: Draft the letter, then hand it on.\n    transitions:\n      - to: review\n        description: The draft is done.\n  review:\n    model: reviewer\n    instructions: Check the draft and say what you think.\n",
    )
    .expect("workflow");
    // `drafter` is served as gpt-4.1-mini and has no price here: its list price applies.
    // `reviewer` is priced here, which beats any list price of the Claude model it runs on.
    let settings = format!(
        "[providers.openai]\nkind = \"openai\"\nbase_url = \"{openai}\"\napi_key_env = \"ARCHMAX_SUITE_OPENAI_KEY\"\n\n\
         [providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"ARCHMAX_SUITE_CLAUDE_KEY\"\n\n\
         [models.\"drafter\"]\nprovider = \"openai\"\nname = \"gpt-4.1-mini\"\n\n\
         [models.\"reviewer\"]\nprovider = \"claude\"\nname = \"claude-sonnet-4-5\"\n\
         price = {{ input = 2.0, output = 10.0, cache_read = 0.2, cache_write = 2.5 }}\n",
        claude.base_url
    );
    std::fs::write(root.join("archmax.toml"), settings).expect("archmax.toml");
    let output = command(
        &root,
        &["run", "letters", "A thank-you note to the caterer.", "--session", "l1", "--events", "events.jsonl"],
    )
    .env("ARCHMAX_SUITE_OPENAI_KEY", "sk-suite")
    .env("ARCHMAX_SUITE_CLAUDE_KEY", "sk-ant-suite")
    .env("ARCHMAX_STREAMING", "0")
    .env_remove("ARCHMAX_MODEL")
    .env_remove("ARCHMAX_PRICE_INPUT")
    .env_remove("ARCHMAX_PRICE_OUTPUT")
    .output()
    .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    let events = std::fs::read_to_string(root.join("events.jsonl")).expect("events");
    let usages: Vec<Value> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "model-usage")
        .collect();
    assert_eq!(usages.len(), 2, "one call on each model: {events}");
    // (input, output, cache read, cache write) in USD per million tokens.
    let expected_rates =
        [("gpt-4.1-mini-2025-04-14", (0.40, 1.60, 0.10, 0.40)), ("claude-sonnet-4-5", (2.0, 10.0, 0.2, 2.5))];
    let mut total = 0.0;
    for (usage, (model, (input, output, read, write))) in usages.iter().zip(expected_rates) {
        assert_eq!(usage["model"], model, "{usage}");
        let tokens = |key: &str| usage[key].as_f64().unwrap_or(f64::NAN);
        let (read_tokens, write_tokens) = (tokens("cacheReadTokens"), tokens("cacheCreationTokens"));
        let uncached = (tokens("inputTokens") - read_tokens - write_tokens).max(0.0);
        let expected =
            (uncached * input + read_tokens * read + write_tokens * write + tokens("outputTokens") * output) / 1e6;
        let cost = usage["costUsd"].as_f64().unwrap_or(f64::NAN);
        assert!(expected > 0.0 && (cost - expected).abs() < 1e-9, "{model}: cost {cost}, expected {expected}: {usage}");
        total += expected;
    }
    assert_eq!(usages[0]["inputTokens"], 12_000);
    assert_eq!(usages[0]["cacheReadTokens"], 8_000);

    let shown = command(&root, &["sessions", "l1", "--json"]).output().expect("archmax runs");
    let session: Value = serde_json::from_slice(&shown.stdout).expect("the session as JSON");
    let recorded = session["usage"]["costUsd"].as_f64().unwrap_or(f64::NAN);
    assert!(
        (recorded - total).abs() < 1e-9,
        "the session's cost is the sum of its calls': {recorded} vs {total}: {session}"
    );
    // The session's account per model and role, each priced as its calls were; the
    // footer shows each share of the turn.
    let lines = session["spend"].as_array().cloned().unwrap_or_default();
    assert_eq!(lines.len(), 2, "{session}");
    for (line, usage) in lines.iter().zip(&usages) {
        assert_eq!((&line["model"], &line["role"], &line["calls"]), (&usage["model"], &json!("agent"), &json!(1)));
        assert_eq!((&line["inputTokens"], &line["costUsd"]), (&usage["inputTokens"], &usage["costUsd"]), "{line}");
        let model = usage["model"].as_str().unwrap_or_default();
        let cost = usage["costUsd"].as_f64().unwrap_or(f64::NAN);
        let shown =
            format!("  {model} · agent · 1 call · in {}", thousands(usage["inputTokens"].as_u64().unwrap_or(0)));
        assert!(stderr.contains(&shown) && stderr.contains(&format!("${cost:.4}")), "{shown} in {stderr}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// `n` with a comma between thousands, as the CLI prints counts.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A one-state workspace whose model `primary` runs on a Claude provider at `claude` and
/// falls back to `backup`, served as gpt-4.1-mini by a chat-completions provider at
/// `openai`.
fn fallback_workspace(label: &str, claude: &str, openai: &str) -> std::path::PathBuf {
    let root = scratch(label);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("workflows/notes")).expect("workspace");
    std::fs::write(
        root.join("workflows/notes/workflow.yaml"),
        "title: Notes\ninstructions: You write short notes.\nstates:\n  write:\n    model: primary\n    triggers:\n      manual:\n        description: Write one note.\n    instructions: Write the note.\n",
    )
    .expect("workflow");
    let settings = format!(
        "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{claude}\"\napi_key_env = \"ARCHMAX_SUITE_CLAUDE_KEY\"\n\n\
         [providers.openai]\nkind = \"openai\"\nbase_url = \"{openai}\"\napi_key_env = \"ARCHMAX_SUITE_OPENAI_KEY\"\n\n\
         [models.\"primary\"]\nprovider = \"claude\"\nname = \"claude-sonnet-4-5\"\nfallbacks = [\"backup\"]\n\n\
         [models.\"backup\"]\nprovider = \"openai\"\nname = \"gpt-4.1-mini\"\n"
    );
    std::fs::write(root.join("archmax.toml"), settings).expect("archmax.toml");
    root
}

fn fallback_run(root: &std::path::Path) -> std::process::Output {
    command(root, &["run", "notes", "Thank the caterer.", "--session", "n1", "--events", "events.jsonl"])
        .env("ARCHMAX_SUITE_OPENAI_KEY", "sk-suite")
        .env("ARCHMAX_SUITE_CLAUDE_KEY", "sk-ant-suite")
        .env("ARCHMAX_STREAMING", "0")
        .env("ARCHMAX_MAX_RETRIES", "1")
        .env_remove("ARCHMAX_MODEL")
        .env_remove("ARCHMAX_PRICE_INPUT")
        .env_remove("ARCHMAX_PRICE_OUTPUT")
        .output()
        .expect("archmax runs")
}

#[test]
fn an_overloaded_provider_falls_back_to_the_next_model_which_is_recorded_and_priced_as_itself() {
    use archmax_vm::model::anthropic::test_server::Scripted;
    let overloaded = || Scripted::Status { status: 529, error_type: "overloaded_error".into(), retry_after: Some(0) };
    let claude = MessagesServer::start(vec![overloaded(), overloaded()]).expect("a loopback server");
    let openai = chat_completions(vec![(
        json!({ "role": "assistant", "content": "Thank you for the lovely lunch." }),
        json!({ "prompt_tokens": 1_000, "completion_tokens": 20 }),
    )]);
    let root = fallback_workspace("providers-fallback", &claude.base_url, &openai);
    let output = fallback_run(&root);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Thank you for the lovely lunch.\n");
    assert!(stderr.contains("↪ primary (claude) failed: the model endpoint answered 529"), "{stderr}");
    assert!(stderr.contains("; trying backup"), "{stderr}");
    assert_eq!(claude.received().len(), 2, "the first model is tried with its retry before the fallback");
    assert_eq!(claude.left(), 0);

    let events: Vec<Value> = std::fs::read_to_string(root.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    let kinds: Vec<&str> =
        events.iter().filter_map(|event| event["event"].as_str()).filter(|kind| kind.starts_with("model-")).collect();
    assert_eq!(kinds, ["model-fallback", "model-usage"], "{events:#?}");
    let fallback = events.iter().find(|event| event["event"] == "model-fallback").expect("the fallback event");
    assert_eq!(
        (&fallback["model"], &fallback["provider"], &fallback["fallback"], &fallback["state"]),
        (&json!("primary"), &json!("claude"), &json!("backup"), &json!("write"))
    );
    let reason = fallback["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("529") && reason.contains("overloaded"), "{reason}");
    let usage = events.iter().find(|event| event["event"] == "model-usage").expect("the usage event");
    assert_eq!((&usage["model"], &usage["fallbackFor"]), (&json!("gpt-4.1-mini-2025-04-14"), &json!("primary")));
    // gpt-4.1-mini's list price: 0.40 in, 1.60 out per million tokens.
    let expected = (1_000.0 * 0.40 + 20.0 * 1.60) / 1e6;
    let cost = usage["costUsd"].as_f64().unwrap_or(f64::NAN);
    assert!((cost - expected).abs() < 1e-12, "cost {cost}, expected {expected}: {usage}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn when_the_model_and_its_fallback_both_fail_the_turn_names_each_attempt() {
    use archmax_vm::model::anthropic::test_server::Scripted;
    let limited = || Scripted::Status { status: 429, error_type: "rate_limit_error".into(), retry_after: Some(0) };
    let claude = MessagesServer::start(vec![limited(), limited()]).expect("a loopback server");
    // Nothing listens where the fallback's provider points.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let nowhere = format!("http://{}/v1", closed.local_addr().expect("its address"));
    drop(closed);
    let root = fallback_workspace("providers-fallback-exhausted", &claude.base_url, &nowhere);
    let output = fallback_run(&root);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the turn fails: {stderr}");
    assert!(
        stderr.contains("the model `primary` and its fallbacks all failed; tried `primary` (claude): the model endpoint answered 429"),
        "{stderr}"
    );
    // The whole account is the session's exit reason.
    let shown = command(&root, &["sessions", "n1", "--json"]).output().expect("archmax runs");
    let session: Value = serde_json::from_slice(&shown.stdout).expect("the session as JSON");
    let reason = session["exit"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("then `backup` (openai): the model endpoint failed") && reason.contains("Connection refused"),
        "{session}"
    );
    let events = std::fs::read_to_string(root.join("events.jsonl")).expect("events");
    assert!(!events.contains("\"model-usage\""), "nothing answered, so nothing was spent: {events}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_flow_runs_on_the_provider_the_workspaces_archmax_toml_routes_its_model_to() {
    let server = MessagesServer::start(vec![Answer::tool_use(
        "",
        "toolu_answer",
        "answer",
        json!({ "outcome": "passed", "note": "the change reads well" }),
    )])
    .expect("a loopback server");
    let root = workspace("providers-flow", &server.base_url);
    std::fs::write(
        root.join("flow.yaml"),
        "id: review\nroot:\n  id: root\n  nodes:\n    - id: judge\n      run: { prompt: Judge the change. }\n",
    )
    .expect("flow");
    let output = command(&root, &["flow", "run", "flow.yaml", "--input", "Check the change", "--no-session"])
        .env("ARCHMAX_SUITE_CLAUDE_KEY", "sk-ant-suite")
        .env("ARCHMAX_MODEL", "claude-sonnet")
        .output()
        .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("step ✓ root.judge"), "{stderr}");
    let received = server.received();
    assert_eq!(received.len(), 1, "{stderr}");
    assert_eq!(received[0].header("x-api-key"), Some("sk-ant-suite"));
    assert_eq!(received[0].body["model"], "claude-sonnet-4-5", "the route's own name for the model is sent");

    // Without the key the flow refuses to start, naming the variable.
    let output = command(&root, &["flow", "run", "flow.yaml", "--input", "Check", "--no-session"])
        .env_remove("ARCHMAX_SUITE_CLAUDE_KEY")
        .env("ARCHMAX_MODEL", "claude-sonnet")
        .output()
        .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("ARCHMAX_SUITE_CLAUDE_KEY"), "{stderr}");
    let _ = std::fs::remove_dir_all(&root);
}

/// The notes workspace on Claude alone, with `limits` as its `[limits]` table.
fn budget_workspace(label: &str, claude: &str, limits: &str) -> std::path::PathBuf {
    let root = fallback_workspace(label, claude, "http://127.0.0.1:9/v1");
    let settings = format!(
        "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{claude}\"\napi_key_env = \"ARCHMAX_SUITE_CLAUDE_KEY\"\n\n\
         [models.\"primary\"]\nprovider = \"claude\"\nname = \"claude-sonnet-4-5\"\n\n[limits]\n{limits}\n"
    );
    std::fs::write(root.join("archmax.toml"), settings).expect("archmax.toml");
    root
}

/// `archmax <args>` in the budget workspace, on Claude.
fn on_claude(root: &std::path::Path, args: &[&str]) -> std::process::Output {
    command(root, args)
        .env("ARCHMAX_SUITE_CLAUDE_KEY", "sk-ant-suite")
        .env_remove("ARCHMAX_MODEL")
        .env_remove("ARCHMAX_PRICE_INPUT")
        .env_remove("ARCHMAX_PRICE_OUTPUT")
        .output()
        .expect("archmax runs")
}

#[test]
fn a_session_on_claude_stops_at_its_budget_by_the_usage_claude_reports_and_goes_on_when_raised() {
    let read = || Answer::tool_use("", "toolu_vars", "archmax_get_variables", json!({}));
    let claude = MessagesServer::start(vec![read(), Answer::text("Thank you for the lovely lunch."), read()])
        .expect("a loopback server");

    // One call a turn: the second is not made, and a raise lets the next turn make it.
    let root = budget_workspace("providers-budget-calls", &claude.base_url, "max_model_calls_per_turn = 1");
    let run = ["run", "notes", "Thank the caterer.", "--session", "b1", "--events", "events.jsonl"];
    let output = on_claude(&root, &run);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("⛔ budget: this turn has made 1 model call,"), "{stderr}");
    assert!(stderr.contains("next: archmax reply b1 --raise-budget"), "{stderr}");
    assert_eq!(claude.received().len(), 1, "the second call was not made");
    let refused = on_claude(&root, &["reply", "b1", "Go", "on."]);
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(claude.received().len(), 1, "a refused reply calls nothing");
    let raised = on_claude(&root, &["reply", "b1", "--raise-budget", "Go", "on."]);
    let stderr = String::from_utf8_lossy(&raised.stderr);
    assert!(raised.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&raised.stdout), "Thank you for the lovely lunch.\n");
    assert!(stderr.contains("⬆ budget raised"), "{stderr}");
    let received = claude.received();
    assert_eq!(received.len(), 2);
    assert!(received[1].problems.is_empty(), "the server found {:?}", received[1].problems);
    // The stopped state goes on with what it had, the raise's note and the message.
    let sent = received[1].body["messages"].to_string();
    assert!(
        sent.contains("toolu_vars") && sent.contains("raised the session's budget") && sent.contains("Go on."),
        "{sent}"
    );
    let _ = std::fs::remove_dir_all(&root);

    // A cost limit below one call: the spend Claude's usage prices stops the next call.
    let root = budget_workspace("providers-budget-cost", &claude.base_url, "max_cost_per_session = 0.0001");
    let output =
        on_claude(&root, &["run", "notes", "Thank the caterer.", "--session", "b2", "--events", "events.jsonl"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(claude.received().len(), 3, "one call, then the stop");
    let events: Vec<Value> = std::fs::read_to_string(root.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    let usage = events.iter().find(|event| event["event"] == "model-usage").expect("the call's usage");
    let stop = events.iter().find(|event| event["event"] == "budget-stopped").expect("the stop");
    let cost = usage["costUsd"].as_f64().expect("claude-sonnet-4-5 has a list price");
    assert_eq!(stop["limit"], "max_cost_per_session", "{stop}");
    assert_eq!(stop["spent"].as_f64(), Some(cost), "the stop counts what Claude's usage cost: {stop}");
    let _ = std::fs::remove_dir_all(&root);
}
