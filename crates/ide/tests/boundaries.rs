//! The language layer's boundary: what `archmax-ide` links must stay free of any editor
//! protocol, of tokio and of the VM (the crate docs say why). Read from `cargo tree`, so a
//! dependency that sneaks in through another crate is caught too.

use std::process::Command;

/// Crates the language layer must never link, directly or through another crate.
const FORBIDDEN: [&str; 4] = ["lsp-types", "lsp-server", "tokio", "archmax-vm"];

#[test]
fn the_language_layer_links_no_protocol_crate_no_tokio_and_not_the_vm() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--manifest-path", manifest, "-p", "archmax-ide", "-e", "normal", "--prefix", "none"])
        .output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => panic!("cargo tree failed: {}", String::from_utf8_lossy(&output.stderr)),
        Err(error) => panic!("cargo could not be started: {error}"),
    };
    let tree = String::from_utf8_lossy(&output.stdout);
    let linked: Vec<&str> = tree.lines().filter_map(|line| line.split_whitespace().next()).collect();
    assert!(linked.contains(&"archmax-compiler"), "the tree lists the crate's dependencies: {tree}");
    let found: Vec<&&str> = FORBIDDEN.iter().filter(|name| linked.contains(name)).collect();
    assert!(found.is_empty(), "archmax-ide links {found:?}; keep protocol, runtime and VM crates out of it");
}
