//! The workspace's layering, checked: for each crate, the crates it must never link,
//! directly or through another crate (ARCHITECTURE.md, "Layers"). Read from `cargo tree`
//! over normal dependencies, so a forbidden edge that sneaks in through a third crate fails
//! here too. Development dependencies are free: tests may reach further than the library.
//! Also the size rules of the code map: no library file over 800 lines before its tests, no
//! function over 150 lines.

use std::process::Command;

/// The front end's crates: a runner built without them loads artifacts and never parses YAML.
const FRONT_END: [&str; 5] = ["archmax-compiler", "archmax-migrate", "saphyr-parser", "petgraph", "miette"];

/// The OpenTelemetry SDK and its bridge to `tracing`: only archmax-telemetry (and the CLI
/// through it) links them; the VM and the server make plain `tracing` spans.
const OPENTELEMETRY: [&str; 4] = ["opentelemetry", "opentelemetry_sdk", "opentelemetry-otlp", "tracing-opentelemetry"];

/// The crates above the VM: the products built from it.
const PRODUCTS: [&str; 6] =
    ["archmax-cli", "archmax-serve", "archmax-mcp", "archmax-store-postgres", "archmax-flow", "archmax-ide"];

/// One rule: the crate, the `cargo tree` feature arguments it is checked with, and what it
/// must never link.
struct Rule {
    package: &'static str,
    features: &'static [&'static str],
    forbidden: Vec<&'static str>,
    why: &'static str,
}

fn rules() -> Vec<Rule> {
    let everything_else = |keep: &[&str]| -> Vec<&'static str> {
        [
            "archmax-program",
            "archmax-config",
            "archmax-compiler",
            "archmax-migrate",
            "archmax-stdlib",
            "archmax-vm",
            "archmax-flow",
            "archmax-store-postgres",
            "archmax-mcp",
            "archmax-serve",
            "archmax-ide",
            "archmax-cli",
        ]
        .into_iter()
        .filter(|name| !keep.contains(name))
        .collect()
    };
    let with = |mut list: Vec<&'static str>, more: &[&'static str]| {
        list.extend_from_slice(more);
        list
    };
    vec![
        Rule {
            package: "archmax-program",
            features: &[],
            forbidden: with(
                everything_else(&["archmax-program"]),
                &["saphyr-parser", "petgraph", "miette", "tokio", "reqwest"],
            ),
            why: "the compiled program is the base every other crate stands on; it reads no YAML and does no I/O",
        },
        Rule {
            package: "archmax-config",
            features: &[],
            forbidden: with(
                everything_else(&["archmax-config", "archmax-program"]),
                &["saphyr-parser", "petgraph", "tokio"],
            ),
            why: "archmax.toml is read by the front end and the runner alike, so it needs only the program",
        },
        Rule {
            package: "archmax-compiler",
            features: &[],
            forbidden: with(
                everything_else(&["archmax-compiler", "archmax-program", "archmax-config"]),
                &["tokio", "reqwest"],
            ),
            why: "the front end turns sources into a program; it never runs one",
        },
        Rule {
            package: "archmax-stdlib",
            features: &[],
            forbidden: with(everything_else(&["archmax-stdlib", "archmax-program", "archmax-config"]), &FRONT_END),
            why: "the built-in tools run inside a runner, which may be built without the front end",
        },
        Rule {
            package: "archmax-vm",
            features: &["--no-default-features"],
            forbidden: with(
                everything_else(&["archmax-vm", "archmax-program", "archmax-config", "archmax-stdlib"]),
                &FRONT_END,
            ),
            why: "a runner built without `frontend` loads artifacts and never parses YAML",
        },
        Rule {
            package: "archmax-vm",
            features: &[],
            forbidden: with(
                with(PRODUCTS.to_vec(), &["archmax-migrate", "axum", "tokio-postgres", "rmcp", "lsp-server"]),
                &OPENTELEMETRY,
            ),
            why: "the VM is a library the products are built from; it knows none of them, and its spans reach OpenTelemetry only through the host's bridge",
        },
        Rule {
            package: "archmax-store-postgres",
            features: &[],
            forbidden: with(
                PRODUCTS.iter().copied().filter(|name| *name != "archmax-store-postgres").collect(),
                &["axum"],
            ),
            why: "a session store serves every product and depends on none",
        },
        Rule {
            package: "archmax-mcp",
            features: &[],
            forbidden: ["archmax-cli", "archmax-serve", "archmax-store-postgres", "archmax-flow", "archmax-ide"]
                .to_vec(),
            why: "the MCP host is a tool host for any runner",
        },
        Rule {
            package: "archmax-serve",
            features: &[],
            forbidden: with(
                ["archmax-cli", "archmax-ide", "archmax-flow", "archmax-migrate", "lsp-server"].to_vec(),
                &OPENTELEMETRY,
            ),
            why: "the HTTP runner is a library the CLI starts; it knows nothing of the command line or editors, and it makes `tracing` spans the CLI's exporter sends",
        },
        Rule {
            package: "archmax-telemetry",
            features: &[],
            forbidden: PRODUCTS.to_vec(),
            why: "tracing is set up by the binary for any product; it knows only the VM's bridge",
        },
        Rule {
            package: "archmax-flow",
            features: &[],
            forbidden: ["archmax-cli", "archmax-serve", "archmax-ide", "archmax-store-postgres", "archmax-mcp"]
                .to_vec(),
            why: "flow documents run on the VM's tools, not on a product",
        },
        Rule {
            package: "archmax-ide",
            features: &[],
            forbidden: ["lsp-types", "lsp-server", "tokio", "archmax-vm", "archmax-cli", "archmax-serve"].to_vec(),
            why: "the language layer answers questions about sources; the protocol and the runtime are the CLI's",
        },
        Rule {
            package: "archmax-example-carrier",
            features: &[],
            forbidden: everything_else(&[]),
            why: "the example carrier stands in for an outside team's service; it speaks MCP and knows nothing of archmax",
        },
        Rule {
            package: "archmax-example-payments",
            features: &[],
            forbidden: everything_else(&[]),
            why: "the tutorial's payment system stands in for an outside service; it speaks MCP and knows nothing of archmax",
        },
        Rule {
            package: "archmax-migrate",
            features: &[],
            forbidden: with(
                everything_else(&["archmax-migrate", "archmax-compiler", "archmax-program", "archmax-config"]),
                &["tokio"],
            ),
            why: "migrating a workspace is a source-to-source rewrite over the front end",
        },
    ]
}

/// What `package` links through normal dependencies, built with `features`.
fn linked(package: &str, features: &[&str]) -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--manifest-path", manifest, "-p", package, "-e", "normal", "--prefix", "none"])
        .args(features)
        .output()
        .unwrap_or_else(|error| panic!("cargo could not be started: {error}"));
    assert!(output.status.success(), "cargo tree -p {package} failed: {}", String::from_utf8_lossy(&output.stderr));
    let tree = String::from_utf8_lossy(&output.stdout);
    let names: Vec<String> =
        tree.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect();
    assert_eq!(names.first().map(String::as_str), Some(package), "the tree starts at the crate: {tree}");
    names
}

#[test]
fn no_crate_links_what_its_layer_forbids() {
    let mut broken = Vec::new();
    for rule in rules() {
        let names = linked(rule.package, rule.features);
        let found: Vec<&&str> =
            rule.forbidden.iter().filter(|name| names.iter().any(|linked| linked == *name)).collect();
        if !found.is_empty() {
            broken.push(format!("{} {:?} links {found:?}: {}", rule.package, rule.features, rule.why));
        }
    }
    assert!(broken.is_empty(), "forbidden dependency edges:\n{}", broken.join("\n"));
}

#[test]
fn the_rules_see_the_edges_that_are_allowed() {
    // A check that cannot fail is no check: the tree the rules read does hold the crates
    // each layer is built on, so a forbidden name would be seen if it were there.
    let vm = linked("archmax-vm", &[]);
    for expected in ["archmax-program", "archmax-stdlib", "archmax-compiler", "saphyr-parser", "tokio"] {
        assert!(vm.iter().any(|name| name == expected), "archmax-vm's default tree lacks {expected}: {vm:?}");
    }
    let runner = linked("archmax-vm", &["--no-default-features"]);
    assert!(runner.iter().any(|name| name == "archmax-stdlib"), "{runner:?}");
    let cli = linked("archmax-cli", &[]);
    for product in PRODUCTS {
        assert!(cli.iter().any(|name| name == product), "archmax-cli links every product; {product} is missing");
    }
}

/// Functions allowed over the length bound until they are split by the phases they mark:
/// none are left, and none may be added.
const LONG_FUNCTIONS: [&str; 0] = [];

/// Test support compiled only for tests or with the `test-support` feature: free of the
/// length rules like the tests it serves.
const TEST_SUPPORT: [&str; 2] = ["crates/vm/src/session/conformance.rs", "crates/store-postgres/src/test_cluster.rs"];

/// The Rust sources of the crates' libraries and binaries: tests, benches and examples
/// are free of the length rules.
fn library_sources(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["tests", "benches", "examples", "fuzz", "target"].contains(&name.as_str()) {
                library_sources(&path, found);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_file_passes_800_lines_and_no_function_150_before_its_tests() {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut sources = Vec::new();
    library_sources(&repository.join("crates"), &mut sources);
    assert!(sources.len() > 100, "the walk finds the crates' sources: {}", sources.len());
    let mut over = Vec::new();
    let mut seen_long = Vec::new();
    let (mut measured, mut longest) = (0, 0);
    for path in &sources {
        let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let lines: Vec<&str> = text.lines().take_while(|line| !line.starts_with("#[cfg(test)]")).collect();
        let shown = path.strip_prefix(&repository).unwrap_or(path).display().to_string();
        if TEST_SUPPORT.contains(&shown.as_str()) {
            continue;
        }
        if lines.len() > 800 {
            over.push(format!("{shown}: {} lines before its tests (at most 800)", lines.len()));
        }
        // rustfmt puts a function's closing brace alone at the indentation of its `fn`.
        for (start, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            let Some(name) = function_name(body) else { continue };
            if line.trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            let Some(length) = lines[start..].iter().position(|line| line.trim_end() == close) else { continue };
            measured += 1;
            longest = longest.max(length + 1);
            if length + 1 > 150 {
                let key = format!("{shown} {name}");
                if LONG_FUNCTIONS.contains(&key.as_str()) {
                    seen_long.push(key);
                } else {
                    over.push(format!("{shown}:{}: `{name}` is {} lines (at most 150)", start + 1, length + 1));
                }
            }
        }
    }
    // A bound that measures nothing holds vacuously: the walk does find the functions and
    // their closing braces, long ones among them.
    assert!(measured > 1000 && longest > 100, "{measured} functions measured, the longest {longest} lines");
    assert!(over.is_empty(), "split these by the phases they mark:\n{}", over.join("\n"));
    let shrunk: Vec<&&str> = LONG_FUNCTIONS.iter().filter(|key| !seen_long.iter().any(|seen| seen == **key)).collect();
    assert!(shrunk.is_empty(), "now within the bound; take them off LONG_FUNCTIONS: {shrunk:?}");
}

/// The name a line declaring a function gives it (`pub(crate) async fn name<…>(`).
fn function_name(line: &str) -> Option<&str> {
    let mut rest = line;
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}
