//! `deploy/grafana/archmax-dashboard.json`: well-formed, every query valid PromQL, and
//! built only from what a live runner exposes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::Command;

use serde_json::Value;

use crate::live;
use crate::support::{repository, scratch};

/// Labels Prometheus adds to every series it scrapes; a panel may group by them.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

fn dashboard() -> Value {
    let path = repository().join("deploy/grafana/archmax-dashboard.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display()))
}

/// Every panel, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let top = dashboard["panels"].as_array().expect("the dashboard has panels");
    top.iter()
        .flat_map(|panel| std::iter::once(panel).chain(panel["panels"].as_array().into_iter().flatten()))
        .collect()
}

/// `(panel title, expression)` for every query.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("a query of `{title}` has no expr"));
            found.push((title.to_string(), expr.to_string()));
        }
    }
    found
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_whose_panels_fit_the_grid() {
    let dashboard = dashboard();
    for key in ["title", "uid"] {
        assert!(dashboard[key].as_str().is_some_and(|text| !text.is_empty()), "the dashboard has a {key}");
    }
    assert!(dashboard["schemaVersion"].is_u64(), "the dashboard has a schemaVersion");
    let variables = dashboard["templating"]["list"].as_array().expect("the dashboard has variables");
    let datasource = variables.iter().find(|variable| variable["type"] == "datasource");
    let datasource = datasource.and_then(|variable| variable["name"].as_str()).expect("a data source variable");
    let reference = format!("${{{datasource}}}");

    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().expect("every panel has a title");
        assert!(ids.insert(panel["id"].as_u64().expect("a numeric id")), "panel ids are unique: `{title}`");
        let grid = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|key| grid[key].as_u64().expect("gridPos has x, y, w and h"));
        assert!(w >= 1 && h >= 1 && x + w <= 24, "`{title}` fits Grafana's 24 columns");
        for cell in (x..x + w).flat_map(|column| (y..y + h).map(move |row| (column, row))) {
            if let Some(other) = cells.insert(cell, title.to_string()) {
                panic!("`{title}` overlaps `{other}`");
            }
        }
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], reference.as_str(), "`{title}` reads the chosen data source");
        let targets = panel["targets"].as_array().filter(|targets| !targets.is_empty());
        let targets = targets.unwrap_or_else(|| panic!("`{title}` has queries"));
        let refs: BTreeSet<&str> = targets.iter().filter_map(|target| target["refId"].as_str()).collect();
        assert_eq!(refs.len(), targets.len(), "`{title}`'s queries have distinct refIds");
    }
}

/// `promtool check rules` over one recording rule per expression: whether it passed and
/// what it said.
fn promtool_check_rules(expressions: &[String]) -> (bool, String) {
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (index, expr) in expressions.iter().enumerate() {
        // A JSON string is a YAML double-quoted scalar, so every expression is quoted safely.
        rules.push_str(&format!(
            "      - record: archmax:dashboard_query_{index}\n        expr: {}\n",
            Value::from(expr.as_str())
        ));
    }
    let path = scratch("dashboard-rules").with_extension("yaml");
    fs::write(&path, rules).expect("write the rules file");
    let binary = std::env::var("ARCHMAX_PROMTOOL").unwrap_or_else(|_| "promtool".to_string());
    let output = Command::new(&binary).args(["check", "rules"]).arg(&path).output().unwrap_or_else(|error| {
        panic!(
            "`{binary}` could not be started ({error}): install Debian's `prometheus` package \
             (`apt-get install prometheus`; `.ci/run` does this) or name the binary in ARCHMAX_PROMTOOL"
        )
    });
    let _ = fs::remove_file(&path);
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

#[test]
fn every_query_is_promql_that_promtool_accepts() {
    let expressions: Vec<String> = queries(&dashboard()).into_iter().map(|(_, expr)| expr).collect();
    assert!(!expressions.is_empty(), "the dashboard has queries");
    let (passed, said) = promtool_check_rules(&expressions);
    assert!(passed, "promtool refuses a dashboard query:\n{said}");
    let (passed, _) = promtool_check_rules(&["sum by (workflow (rate(archmax_turns_total[5m]))".to_string()]);
    assert!(!passed, "promtool refuses a broken query, so the check above can fail");
}

/// What a scrape exposes: each family's type, and the label names of each sample name.
struct Exposition {
    families: BTreeMap<String, String>,
    labels: BTreeMap<String, BTreeSet<String>>,
}

fn read_exposition(text: &str) -> Exposition {
    let mut families = BTreeMap::new();
    let mut labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut words = declared.split_whitespace();
            if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                families.insert(name.to_string(), kind.to_string());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let names = labels.entry(line[..name_end].to_string()).or_default();
            if let Some(inside) = line[name_end..].strip_prefix('{') {
                // Label values are escaped, so `",` never occurs inside one.
                for pair in inside.split("\",") {
                    if let Some((name, _)) = pair.split_once("=\"") {
                        names.insert(name.trim().to_string());
                    }
                }
            }
        }
    }
    Exposition { families, labels }
}

/// The metric names an expression reads: its identifiers that start `archmax_`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| word.starts_with("archmax_"))
        .map(str::to_string)
        .collect()
}

/// The labels of every `by (…)` grouping in an expression.
fn grouping_labels(expr: &str) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    for (index, _) in expr.match_indices("by (") {
        let inside = &expr[index + 4..];
        let inside = &inside[..inside.find(')').unwrap_or(inside.len())];
        labels.extend(inside.split(',').map(|label| label.trim().to_string()).filter(|label| !label.is_empty()));
    }
    labels
}

/// The family a sample name belongs to: itself, or the histogram its suffix extends.
fn family_of<'a>(name: &'a str, exposition: &Exposition) -> Option<&'a str> {
    if exposition.families.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        (exposition.families.get(base).map(String::as_str) == Some("histogram")).then_some(base)
    })
}

#[test]
fn every_metric_and_grouping_label_the_dashboard_uses_is_exposed_by_a_live_runner() {
    // A notifier, so the runner exposes `archmax_notifications_total` as one with
    // `[notify]` tables does (its receiver is nowhere: the park's notification fails).
    let notify =
        "[notify.ops]\nurl = \"http://127.0.0.1:9/hook\"\nsecret_env = \"DEPLOY_NOTIFY_KEY\"\nmax_attempts = 1\n";
    let runner =
        live::start("deploy-dashboard", Some(notify), &[("DEPLOY_NOTIFY_KEY", "deploy-notify-key-0123456789")]);
    runner.park_one_session();
    let (status, scrape) = runner.get_text("/metrics", true);
    assert_eq!(status, 200, "the scrape is answered: {scrape}");
    let exposition = read_exposition(&scrape);
    assert!(exposition.families.contains_key("archmax_turns_total"), "the scrape was read:\n{scrape}");

    let mut used = BTreeSet::new();
    let mut label_checked = BTreeSet::new();
    for (title, expr) in queries(&dashboard()) {
        let names = metric_names(&expr);
        assert!(!names.is_empty(), "`{title}` reads an archmax metric: {expr}");
        for name in &names {
            let family = family_of(name, &exposition)
                .unwrap_or_else(|| panic!("`{title}` reads `{name}`, which the runner does not expose: {expr}"));
            used.insert(family.to_string());
            // Where the scrape has samples of it, every grouping label must be one of theirs.
            let Some(present) = exposition.labels.get(name.as_str()).filter(|labels| !labels.is_empty()) else {
                continue;
            };
            for label in grouping_labels(&expr) {
                assert!(
                    present.contains(&label) || TARGET_LABELS.contains(&label.as_str()),
                    "`{title}` groups `{name}` by `{label}`, which its samples do not carry ({present:?})"
                );
            }
            label_checked.insert(name.clone());
        }
    }
    for sampled in [
        "archmax_turns_total",
        "archmax_steps_total",
        "archmax_parked_sessions",
        "archmax_turn_duration_seconds_bucket",
    ] {
        assert!(
            label_checked.contains(sampled),
            "the parked session gave `{sampled}` samples whose labels were checked"
        );
    }
    let unused: Vec<&String> = exposition.families.keys().filter(|family| !used.contains(*family)).collect();
    assert!(unused.is_empty(), "the runner exposes metrics no panel shows; add them to the dashboard: {unused:?}");
}
