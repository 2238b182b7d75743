//! `deploy/k8s/`: the checks a schema cannot make. The manifests are read with the
//! project's own YAML loader (`archmax_compiler::syntax::yaml`, on saphyr) and walked as
//! JSON.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use archmax_compiler::source::FileId;
use archmax_compiler::syntax::yaml;
use archmax_config::mounts::parse_mounts;
use archmax_config::settings::providers::check_routes;
use archmax_config::settings::{RunnerSettings, check_environment, parse_runner_settings};
use serde_json::Value;

use crate::live;
use crate::support::{archmax, repository};

fn k8s_dir() -> PathBuf {
    repository().join("deploy/k8s")
}

/// One manifest, loaded as the runtime loads YAML, as JSON.
fn manifest(file: &str) -> Value {
    let path = k8s_dir().join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    let document = yaml::load(FileId(0), &text);
    assert!(document.diagnostics.is_empty(), "{file} does not load: {:?}", document.diagnostics);
    document.root.unwrap_or_else(|| panic!("{file} holds no document")).to_json()
}

/// The Deployment's one container, `archmax`.
fn container(deployment: &Value) -> &Value {
    let containers = deployment.pointer("/spec/template/spec/containers").and_then(Value::as_array);
    let containers = containers.expect("the Deployment lists containers");
    assert_eq!(containers.len(), 1, "the Deployment runs one container");
    assert_eq!(containers[0]["name"], "archmax");
    &containers[0]
}

/// The container's arguments; the image's entry point is `archmax`, so they are the
/// command line after it, and no `command` may replace that entry point.
fn arguments(container: &Value) -> Vec<String> {
    assert!(container.get("command").is_none(), "the image's entry point (`archmax`) is kept: no `command`");
    let args = container["args"].as_array().expect("the container has args");
    let args: Vec<String> =
        args.iter().map(|arg| arg.as_str().expect("every argument is a string").to_string()).collect();
    assert_eq!(args.first().map(String::as_str), Some("serve"), "the arguments run `archmax serve`");
    args
}

/// The value of `--name` in `args`, as `--name=value` or `--name value`.
fn flag(args: &[String], name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    args.iter().enumerate().find_map(|(index, arg)| {
        if let Some(value) = arg.strip_prefix(&prefix) {
            return Some(value.to_string());
        }
        (arg == name).then(|| args.get(index + 1).cloned()).flatten()
    })
}

/// `archmax serve --help`'s default for `--name`.
fn help_default(name: &str) -> String {
    let help = archmax(&repository(), &["serve", "--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let mut lines = help.stdout.lines().skip_while(|line| !line.trim_start().starts_with(name));
    lines
        .find_map(|line| line.split("[default: ").nth(1).and_then(|rest| rest.split(']').next()))
        .unwrap_or_else(|| panic!("`archmax serve --help` gives no default for {name}:\n{}", help.stdout))
        .to_string()
}

#[test]
fn the_deployments_arguments_parse_with_this_builds_serve() {
    let deployment = manifest("deployment.yaml");
    let args = arguments(container(&deployment));
    // clap reads every argument before it acts on `--help`: an unknown flag or a value
    // its parser refuses ends the run with a usage error (2) instead of the help.
    let mut with_help: Vec<&str> = args.iter().map(String::as_str).collect();
    with_help.push("--help");
    let parsed = archmax(&repository(), &with_help);
    assert_eq!(parsed.code, 0, "`archmax {}` does not parse:\n{}", args.join(" "), parsed.stderr);
    assert!(parsed.stdout.contains("Usage: archmax serve"), "{}", parsed.stdout);
    for broken in [["--no-such-flag"], ["--grace=-5"]] {
        let mut probe: Vec<&str> = args.iter().map(String::as_str).collect();
        probe.extend(broken);
        probe.push("--help");
        let refused = archmax(&repository(), &probe);
        assert_eq!(refused.code, 2, "{broken:?} before --help is refused, so the check above can fail");
    }
}

#[test]
fn the_grace_period_outlasts_serve_grace() {
    let deployment = manifest("deployment.yaml");
    let args = arguments(container(&deployment));
    let grace = flag(&args, "--grace").unwrap_or_else(|| help_default("--grace"));
    let grace: f64 = grace.parse().unwrap_or_else(|_| panic!("--grace {grace} is a number of seconds"));
    let period = deployment.pointer("/spec/template/spec/terminationGracePeriodSeconds").and_then(Value::as_f64);
    let period = period.expect("the pod sets terminationGracePeriodSeconds");
    assert!(
        period > grace,
        "terminationGracePeriodSeconds ({period}) must outlast --grace ({grace}), or SIGKILL cuts turns the runner was letting finish"
    );
}

/// The environment variables the Deployment sets, each from a Secret or a ConfigMap.
fn environment(container: &Value) -> BTreeSet<String> {
    let entries = container["env"].as_array().expect("the container sets its environment");
    entries
        .iter()
        .map(|entry| {
            let name = entry["name"].as_str().expect("an env entry has a name");
            assert!(
                entry.get("value").is_none() && entry.get("valueFrom").is_some(),
                "{name} is set by reference (valueFrom), never inline"
            );
            name.to_string()
        })
        .collect()
}

/// The ConfigMap's `archmax.toml`.
fn archmax_toml() -> String {
    let config = manifest("configmap.yaml");
    config.pointer("/data/archmax.toml").and_then(Value::as_str).expect("the ConfigMap holds archmax.toml").to_string()
}

#[test]
fn the_configmaps_archmax_toml_is_read_clean_and_its_variables_are_set() {
    let text = archmax_toml();
    let (_, mount_problems) = parse_mounts(FileId(0), &text);
    assert!(mount_problems.is_empty(), "archmax.toml's mounts: {mount_problems:?}");
    let (settings, problems) = parse_runner_settings(FileId(0), &text);
    assert!(problems.is_empty(), "archmax.toml's runner tables: {problems:?}");
    assert!(!settings.models.is_empty(), "the ConfigMap routes at least one model (the reader saw the file)");

    let deployment = manifest("deployment.yaml");
    let set = environment(container(&deployment));
    let missing = unset_variables(&settings, |name| set.contains(name).then(|| "set".to_string()));
    assert!(missing.is_empty(), "archmax.toml names variables the Deployment does not set: {missing:?}");
    let unset = unset_variables(&settings, |_| None);
    assert!(!unset.is_empty(), "with no variable set the check reports the provider key, so it can fail");
}

/// What the runner finds unset at start: the MCP servers' variables and the providers' keys.
fn unset_variables(settings: &RunnerSettings, env: impl Fn(&str) -> Option<String> + Copy) -> Vec<String> {
    let mut problems = check_environment(settings, env);
    problems.extend(check_routes(settings, &[], env));
    problems.into_iter().map(|problem| problem.message).collect()
}

/// The named container port `port` refers to, as a number.
fn container_port(container: &Value, port: &Value) -> u64 {
    let ports = container["ports"].as_array().expect("the container declares its ports");
    let found = ports.iter().find(|declared| match port {
        Value::String(name) => declared["name"].as_str() == Some(name.as_str()),
        number => declared["containerPort"] == *number,
    });
    let found = found.unwrap_or_else(|| panic!("port {port} is not one the container declares"));
    found["containerPort"].as_u64().expect("a numeric containerPort")
}

#[test]
fn the_probes_are_routes_a_runner_answers_without_a_token() {
    let deployment = manifest("deployment.yaml");
    let container = container(&deployment);
    let args = arguments(container);
    let listen = flag(&args, "--listen").expect("the runner listens beyond loopback (--listen)");
    let listen_port: u64 = listen.rsplit(':').next().and_then(|port| port.parse().ok()).expect("--listen has a port");

    let probes = [("readinessProbe", Some("/readyz")), ("livenessProbe", Some("/healthz")), ("startupProbe", None)];
    let mut paths = Vec::new();
    for (probe, required) in probes {
        let Some(get) = container.get(probe).map(|probe| &probe["httpGet"]) else {
            assert!(required.is_none(), "the container has a {probe}");
            continue;
        };
        let path = get["path"].as_str().unwrap_or_else(|| panic!("{probe} is an HTTP GET with a path"));
        if let Some(required) = required {
            assert_eq!(path, required, "{probe} asks {required}");
        }
        assert_eq!(container_port(container, &get["port"]), listen_port, "{probe} asks the port --listen serves");
        paths.push(path.to_string());
    }

    // The ConfigMap's archmax.toml, with its provider key set, is what this runner starts on.
    let runner = live::start("deploy-probes", Some(&archmax_toml()), &[("ANTHROPIC_API_KEY", "unused-by-the-tape")]);
    for path in &paths {
        let (status, body) = runner.get_text(path, false);
        assert_eq!(status, 200, "the kubelet's GET {path} (no token) is answered 200: {body}");
    }
    let (status, _) = runner.get_text("/metrics", false);
    assert_eq!(status, 401, "the runner demands a token elsewhere, so the probes' 200 is not an open server's");
}

/// Whether every `key: value` of `selector` is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a label selector");
    !selector.is_empty() && selector.iter().all(|(key, value)| labels.get(key) == Some(value))
}

#[test]
fn the_service_budget_and_kustomization_fit_the_deployment() {
    let deployment = manifest("deployment.yaml");
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    let replicas = deployment["spec"]["replicas"].as_u64().expect("replicas");
    assert!(replicas >= 2, "a fleet runs two or more runners");
    assert!(selects(&deployment["spec"]["selector"]["matchLabels"], labels), "the Deployment selects its pods");

    let service = manifest("service.yaml");
    assert!(selects(&service["spec"]["selector"], labels), "the Service selects the runners");
    for port in service["spec"]["ports"].as_array().expect("the Service's ports") {
        container_port(container(&deployment), &port["targetPort"]);
    }

    let budget = manifest("pdb.yaml");
    assert!(selects(&budget["spec"]["selector"]["matchLabels"], labels), "the budget covers the runners");
    let min_available = budget["spec"]["minAvailable"].as_u64().expect("the budget sets minAvailable");
    assert!(min_available >= 1 && min_available < replicas, "a drain may retire one runner, never the last");

    // archmax.toml lands in the workspace root the runner reads.
    let container = container(&deployment);
    let args = arguments(container);
    let root = flag(&args, "--root").expect("the runner names its workspace root");
    let config_name = manifest("configmap.yaml")["metadata"]["name"].clone();
    let volumes = pod["spec"]["volumes"].as_array().expect("the pod's volumes");
    let config_volume = volumes.iter().find(|volume| volume["configMap"]["name"] == config_name);
    let config_volume = config_volume.expect("a volume mounts the archmax.toml ConfigMap");
    let mounts = container["volumeMounts"].as_array().expect("the container's mounts");
    let mounted_at = |volume: &Value| {
        mounts
            .iter()
            .filter(|mount| mount["name"] == volume["name"])
            .map(|mount| mount["mountPath"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(mounted_at(config_volume), vec![Value::from(format!("{root}/archmax.toml"))]);
    // The tokens file is one mounted file (a Secret volume's keys are links, which the
    // runner refuses for secrets).
    let tokens = flag(&args, "--tokens").expect("the runner demands tokens");
    let tokens_mount = mounts.iter().find(|mount| mount["mountPath"] == tokens.as_str());
    assert!(tokens_mount.is_some_and(|mount| mount.get("subPath").is_some()), "--tokens {tokens} is a subPath mount");

    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    for bound in ["requests", "limits"] {
        assert!(container["resources"][bound]["memory"].is_string(), "the container sets its memory {bound}");
    }

    let kustomization = manifest("kustomization.yaml");
    let listed: BTreeSet<String> = kustomization["resources"]
        .as_array()
        .expect("the kustomization lists resources")
        .iter()
        .map(|resource| resource.as_str().expect("a file name").to_string())
        .collect();
    let present: BTreeSet<String> = fs::read_dir(k8s_dir())
        .expect("deploy/k8s")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml") && name != "kustomization.yaml")
        .collect();
    assert_eq!(
        listed, present,
        "kustomization.yaml lists every manifest of deploy/k8s (and .ci/k8s.sh validates those)"
    );
    for file in &present {
        assert_ne!(manifest(file)["kind"], "Secret", "{file}: Secrets are referenced by name, never committed");
    }
}
