//! The deployment files under `deploy/`, held to the code: what a schema validator cannot
//! see. (`.ci/k8s.sh` checks the Kubernetes manifests against the Kubernetes schemas.)
//!
//! - [`kubernetes`]: the Deployment's serve arguments parse with this build's `archmax
//!   serve`, its grace period outlasts `--grace`, its probes are routes a live runner
//!   answers without a token, the ConfigMap's `archmax.toml` is read clean by the
//!   project's own reader and accepted by a runner at start, and the Service, the budget
//!   and the kustomization point at what exists;
//! - [`dashboard`]: the Grafana dashboard is well-formed, every query parses (Prometheus's
//!   `promtool check rules`), and every metric and grouping label it uses is one a live
//!   runner exposes.
//!
//! The one thing to know: each check runs against the built binary or a live `archmax
//! serve` (the `serving` helpers of the `cli` tests), never against a copy of the names,
//! so renaming a flag, a route or a metric fails here.

mod dashboard;
mod kubernetes;
mod live;

// The helpers the `cli` tests share; this binary uses part of them.
#[allow(dead_code)]
#[path = "../cli/serving.rs"]
mod serving;
#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;
