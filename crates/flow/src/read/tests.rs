//! The reader's rules, one document each.

use super::*;

fn read(text: &str, format: Format) -> Loaded {
    read_text("flow", Path::new("flow"), text, format)
}

fn codes(loaded: &Loaded) -> Vec<&'static str> {
    loaded.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect()
}

#[test]
fn a_valid_document_reads_into_layers_in_document_order() {
    let text = "id: d\nroot:\n  id: root\n  repeat: {max: 2}\n  nodes:\n    - id: a\n    - {id: c, needs: [a, b]}\n    - id: b\n    - {id: g, nodes: [{id: x}], gives: [out]}\n";
    let loaded = read(text, Format::Yaml);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let document = loaded.document.as_ref();
    let layers: Vec<Vec<&str>> = document
        .map(|document| {
            document.root.layers().iter().map(|layer| layer.iter().map(|node| node.id()).collect()).collect()
        })
        .unwrap_or_default();
    assert_eq!(layers, vec![vec!["a", "b", "g"], vec!["c"]]);
    assert_eq!(document.map(|document| document.root.bound(None)), Some(2));
    assert_eq!(document.map(|document| document.root.bound(Some(5))), Some(5));
}

#[test]
fn every_rule_refuses_with_its_code() {
    let cases = [
        ("id: d\nroot: {id: root, nodes: [{id: a, neds: []}]}\n", "AMX1001"),
        ("id: d\nroot: {id: root, nodes: [{id: a.b}]}\n", "AMX1002"),
        ("id: d\nroot: {id: root, nodes: [{id: a}, {id: a}]}\n", "AMX1002"),
        ("id: d\nroot: {id: root, nodes: [{id: a, needs: [a]}]}\n", "AMX1003"),
        ("id: d\nroot: {id: root, needs: [other], nodes: []}\n", "AMX1003"),
        ("id: d\nroot: {id: root, nodes: [{id: a, needs: [b]}, {id: b, needs: [a]}]}\n", "AMX1004"),
        ("id: d\nroot: {id: root, nodes: [{id: g, repeat: {max: two}, nodes: []}]}\n", "AMX1005"),
        ("id: d\nroot: {id: root, nodes: [{id: g, gives: [a, a], nodes: []}]}\n", "AMX1006"),
        ("id: d\nroot: {id: root, nodes: [{id: a, run: {kind: [llm]}}]}\n", "AMX1007"),
        ("id: d\nroot: {id: root, nodes: [{id: a, run: {kind: command, command: [cargo, 1]}}]}\n", "AMX1008"),
        ("id: d\nroot: {id: root, nodes: [{id: a, run: {prompt: p, command: [make]}}]}\n", "AMX1008"),
        ("id: d\nroot: {id: root, nodes: [{id: a, run: {kind: operator}}]}\n", "AMX1009"),
        ("id: d\nroot: {id: root, nodes: [{id: a, run: {scope: [\"**=allowed\", 3]}}]}\n", "AMX1010"),
        ("id: d\nroot: {id: root, nodes: [{id: a, run: {context: [\"\"]}}]}\n", "AMX1011"),
    ];
    for (text, code) in cases {
        let loaded = read(text, Format::Yaml);
        assert!(codes(&loaded).contains(&code), "{text}: {:?}", codes(&loaded));
        assert!(loaded.document.is_none(), "{text} must not produce a document");
    }
}

#[test]
fn a_json_document_must_be_json_and_reads_like_yaml_when_it_is() {
    let loaded = read("{\"id\": \"d\", root: {}}", Format::Json);
    assert_eq!(codes(&loaded), vec!["AMX1000"]);
    let loaded = read("{\"id\": \"d\", \"root\": {\"id\": \"root\", \"nodes\": [{\"id\": \"a\"}]}}", Format::Json);
    assert!(loaded.document.is_some(), "{:?}", loaded.diagnostics);
    assert_eq!(Format::from_path(Path::new("f.yml")), Some(Format::Yaml));
    assert_eq!(Format::from_path(Path::new("f.toml")), None);
}

#[test]
fn a_sibling_that_failed_to_read_still_answers_needs() {
    let text = "id: d\nroot: {id: root, nodes: [{id: a, run: {kind: comand}}, {id: b, needs: [a]}]}\n";
    let loaded = read(text, Format::Yaml);
    assert_eq!(codes(&loaded), vec!["AMX1007"]);
    assert!(loaded.document.is_none());
}

#[test]
fn a_cycle_is_reported_beside_an_unknown_need_each_once() {
    let text = "id: d\nroot: {id: root, nodes: [{id: a, needs: [c]}, {id: b, needs: [a]}, {id: c, needs: [b, zz]}]}\n";
    let mut found = codes(&read(text, Format::Yaml));
    found.sort_unstable();
    assert_eq!(found, vec!["AMX1003", "AMX1004"]);
    // A node needing itself is an unknown need only, not a cycle too.
    let text = "id: d\nroot: {id: root, nodes: [{id: a, needs: [a]}]}\n";
    assert_eq!(codes(&read(text, Format::Yaml)), vec!["AMX1003"]);
}
