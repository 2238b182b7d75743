use super::*;
use crate::settings::parse_runner_settings;

fn read(text: &str) -> (RunnerSettings, Vec<Diagnostic>) {
    parse_runner_settings(FileId(0), text)
}

/// Each diagnostic as `message | help`.
fn problems(text: &str) -> Vec<String> {
    read(text).1.iter().map(|found| format!("{} | {}", found.message, found.help.clone().unwrap_or_default())).collect()
}

#[test]
fn a_full_notifier_and_a_slack_one_are_read_with_their_defaults() {
    let (settings, diagnostics) = read(
        r#"
[serve]
public_url = "https://archmax.example.com/"

[notify.ops]
url = "https://hooks.example.com/archmax"
secret_env = "OPS_HOOK_SECRET"
on = ["waiting", "parked", "failed", "parked"]
waiting_after = "45m"
workflows = ["refunds", "desk"]
timeout_ms = 2_000
max_attempts = 3

[notify.team-slack]
url_env = "TEAM_SLACK_URL"
preset = "slack"
"#,
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(settings.public_url.as_deref(), Some("https://archmax.example.com"), "the trailing slash is dropped");
    let ops = &settings.notify["ops"];
    assert_eq!(ops.target, NotifyTarget::Url("https://hooks.example.com/archmax".into()));
    assert_eq!(ops.secret_env.as_deref(), Some("OPS_HOOK_SECRET"));
    assert_eq!(ops.on, [NotifyEvent::Parked, NotifyEvent::Failed, NotifyEvent::Waiting], "sorted, once each");
    assert_eq!(ops.waiting_after_ms, 45 * 60 * 1000);
    assert_eq!((ops.timeout_ms, ops.max_attempts, ops.preset), (2000, 3, NotifyPreset::Archmax));
    assert!(ops.wants(NotifyEvent::Waiting, "desk") && !ops.wants(NotifyEvent::Parked, "other"));
    let slack = &settings.notify["team-slack"];
    assert_eq!(slack.target, NotifyTarget::UrlEnv("TEAM_SLACK_URL".into()));
    assert_eq!((slack.preset, slack.secret_env.as_deref()), (NotifyPreset::Slack, None), "Slack checks no signature");
    assert_eq!(slack.on, [NotifyEvent::Parked, NotifyEvent::Failed], "the default events");
    assert_eq!(slack.waiting_after_ms, DEFAULT_WAITING_AFTER_MS);
    assert_eq!((slack.timeout_ms, slack.max_attempts), (DEFAULT_NOTIFY_TIMEOUT_MS, DEFAULT_MAX_ATTEMPTS));
    assert!(slack.wants(NotifyEvent::Failed, "anything"), "no `workflows`: every workflow");
    assert!(read("").0.notify.is_empty() && read("").0.public_url.is_none());
}

#[test]
fn every_bad_value_is_named_with_its_key_and_the_fix_and_the_notifier_is_left_out() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "url = \"ftp://x.test\"\nsecret_env = \"K\"",
            "`notify.n.url` is not an http:// or https:// URL",
            "such as https://",
        ),
        ("url = \"https://\"\nsecret_env = \"K\"", "`notify.n.url` names no host", "http(s) URL"),
        ("url = \"https://me:pw@x.test\"\nsecret_env = \"K\"", "`notify.n.url` carries credentials", "`url_env`"),
        ("url = 7\nsecret_env = \"K\"", "`notify.n.url` is not a string", "http(s) URL"),
        ("secret_env = \"K\"", "`notify.n` names no `url`", "`url_env`"),
        ("url = \"https://x.test\"\nurl_env = \"U\"\nsecret_env = \"K\"", "sets both `url` and `url_env`", "keep one"),
        ("url = \"https://x.test\"", "`notify.n` names no `secret_env`", "HMAC-SHA256"),
        (
            "url = \"https://x.test\"\nsecret_env = \"my secret\"",
            "`notify.n.secret_env` is not an environment variable name",
            "never goes in the file",
        ),
        (
            "url_env = \"https://x.test\"\nsecret_env = \"K\"",
            "`notify.n.url_env` is not an environment variable name",
            "variable's name",
        ),
        ("url = \"https://x.test\"\nsecret_env = \"K\"\non = []", "`notify.n.on` is not a list of events", "`parked`"),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\non = [\"parkd\"]",
            "`notify.n.on` names \"parkd\", which is not an event",
            "did you mean \"parked\"?",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\non = [\"waiting\"]\nwaiting_after = \"30\"",
            "`notify.n.waiting_after` is not a duration from 1s to 7d",
            "such as \"30m\"",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\non = [\"waiting\"]\nwaiting_after = \"8d\"",
            "`notify.n.waiting_after` is not a duration",
            "unit (s, m, h or d)",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\nwaiting_after = \"5m\"",
            "sets `waiting_after` but its `on` has no \"waiting\"",
            "add \"waiting\" to `on`",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\nworkflows = [\"Desk\"]",
            "`notify.n.workflows` is not a list of workflow slugs",
            "leave the key out",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\npreset = \"teams\"",
            "`notify.n.preset` is not a preset",
            "`archmax` or `slack`",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\ntimeout_ms = 10",
            "`notify.n.timeout_ms` is not a number of milliseconds from 100 to 60000",
            "such as 10000",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\nmax_attempts = 0",
            "`notify.n.max_attempts` is not a number from 1 to 10",
            "such as 5",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\nsecret = \"inline\"",
            "`notify.n.secret` is not a setting",
            "`[notify.n]` takes",
        ),
        (
            "url = \"https://x.test\"\nsecret_env = \"K\"\nretries = 3",
            "`notify.n.retries` is not a setting",
            "`max_attempts`",
        ),
    ];
    for (body, message, help) in cases {
        let text = format!("[notify.n]\n{body}\n");
        let (settings, diagnostics) = read(&text);
        let found = problems(&text);
        assert_eq!(found.len(), 1, "{body}: {found:?}");
        assert!(found[0].contains(message) && found[0].contains(help), "{body}: {found:?}");
        assert!(diagnostics.iter().all(|diagnostic| diagnostic.code == Code::HostConfig));
        assert!(settings.notify.is_empty(), "{body}: a bad notifier is left out");
    }
}

#[test]
fn a_suggestion_is_made_for_a_misspelt_key() {
    let found = problems("[notify.n]\nurl = \"https://x.test\"\nsecret_env = \"K\"\nwaiting_afer = \"5m\"\n");
    assert!(found[0].contains("did you mean `waiting_after`?"), "{found:?}");
}

#[test]
fn bad_names_tables_and_serve_settings_are_named() {
    let cases: &[(&str, &str)] = &[
        ("[notify.Ops]\nurl = \"https://x.test\"\nsecret_env = \"K\"\n", "the notifier name `Ops` is not a slug"),
        ("notify = 3\n", "`notify` in archmax.toml is not a table"),
        ("[notify]\nops = 3\n", "`notify.ops` is not a table"),
        ("serve = 1\n", "`serve` in archmax.toml is not a table"),
        ("[serve]\npublic_url = \"archmax.example.com\"\n", "`serve.public_url` is not an http:// or https:// URL"),
        ("[serve]\npublic_url = \"https://x.test/?a=b\"\n", "`serve.public_url` holds a query or a fragment"),
        ("[serve]\npublic_url = 80\n", "`serve.public_url` is not a string"),
        ("[serve]\npublic_ur = \"https://x.test\"\n", "`serve.public_ur` is not a setting"),
    ];
    for (text, message) in cases {
        let found = problems(text);
        assert_eq!(found.len(), 1, "{text}: {found:?}");
        assert!(found[0].contains(message), "{text}: {found:?}");
    }
    assert!(problems("[serve]\npublic_ur = \"https://x.test\"\n")[0].contains("did you mean `public_url`?"));
}

#[test]
fn durations_take_a_whole_number_and_a_unit() {
    assert_eq!(duration_ms("1s"), Some(1000));
    assert_eq!(duration_ms("30m"), Some(1_800_000));
    assert_eq!(duration_ms("2h"), Some(7_200_000));
    assert_eq!(duration_ms("1d"), Some(86_400_000));
    for bad in ["", "m", "30", "1.5h", "-1m", "1 m", "1w", "99999999999999999999s"] {
        assert_eq!(duration_ms(bad), None, "{bad}");
    }
}

#[test]
fn the_mount_reader_accepts_the_new_tables() {
    let (_, diagnostics) = crate::mounts::parse_mounts(
        FileId(0),
        "[serve]\npublic_url = \"https://x.test\"\n[notify.n]\nurl = \"https://x.test\"\nsecret_env = \"K\"\n",
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}
