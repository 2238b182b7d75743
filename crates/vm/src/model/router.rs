//! Routing by model id: one adapter per provider of `archmax.toml`, each model id sent to
//! the provider its `[models."<id>"]` entry names, under the provider's own name for it.
//!
//! The one thing to know: an id no entry routes goes to the default adapter (the
//! endpoint of the `ARCHMAX_API_*` variables), unchanged; without one, the call fails
//! with a configuration error naming the id, before anything is sent.
//!
//! A route keyed by a pattern (`claude-*`, see `archmax_config`'s `route_for`) serves
//! every id it matches that no exact route names, sending each under its own id; the
//! pattern with the most characters besides `*` is tried first.
//!
//! Fallbacks: a route may list other model ids (`fallbacks`). When its call fails for a
//! reason another provider may not share ([`ModelError::calls_for_fallback`]: rate limited,
//! overloaded, a server error, unreachable), after the adapter's own retries and
//! `Retry-After` waits, and before any of the answer's text was handed on, the next id is
//! called through its own route (or the default adapter), and so on in order. Only the
//! first id's list is followed, so fallbacks never loop. The answer carries the failed
//! attempts ([`ModelResponse::fallbacks`]) and the id that answered, which the turn loop
//! records as `model-fallback` events and prices by; when every id fails the call fails
//! with [`ModelError::Exhausted`], naming each attempt. Text already shown is never
//! followed by another model's: a failure after it ends the call as it would without
//! fallbacks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use archmax_config::settings::providers::{glob_matches, is_pattern, pattern_weight};

use super::{
    CachePlan, FailedCall, ModelAdapter, ModelError, ModelFuture, ModelRequest, ModelResponse, PromptCache, TextSink,
};

/// Where one model id goes.
#[derive(Clone)]
pub struct Route {
    /// The provider's table name, for messages.
    pub provider: String,
    pub adapter: Arc<dyn ModelAdapter>,
    /// The provider's own name for the model.
    pub name: String,
    /// Model ids to try in order when this one fails with a passing condition.
    pub fallbacks: Vec<String>,
}

/// The provider name a call to the default adapter is recorded under.
const DEFAULT_PROVIDER: &str = "default";

/// An adapter that sends each call to the adapter serving its model id.
pub struct Router {
    /// Routes keyed by one id.
    routes: BTreeMap<String, Route>,
    /// Routes keyed by a pattern, the most specific first.
    patterns: Vec<(String, Route)>,
    default: Option<Arc<dyn ModelAdapter>>,
    /// The model a call that names none runs on (`ARCHMAX_MODEL`).
    default_model: Option<String>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: BTreeMap<&str, (&str, &str)> = self
            .routes
            .iter()
            .chain(self.patterns.iter().map(|(pattern, route)| (pattern, route)))
            .map(|(id, route)| (id.as_str(), (route.provider.as_str(), route.name.as_str())))
            .collect();
        formatter
            .debug_struct("Router")
            .field("routes", &routes)
            .field("default", &self.default.is_some())
            .field("default_model", &self.default_model)
            .finish()
    }
}

impl Router {
    pub fn new(
        routes: BTreeMap<String, Route>,
        default: Option<Arc<dyn ModelAdapter>>,
        default_model: Option<String>,
    ) -> Router {
        let (patterns, routes): (BTreeMap<String, Route>, BTreeMap<String, Route>) =
            routes.into_iter().partition(|(id, _)| is_pattern(id));
        let mut patterns: Vec<(String, Route)> = patterns.into_iter().collect();
        // Stable: between equally specific patterns, key order decides.
        patterns.sort_by_key(|(pattern, _)| std::cmp::Reverse(pattern_weight(pattern)));
        Router { routes, patterns, default, default_model }
    }

    /// The route serving `id`: the one keyed by the id, else the first pattern matching
    /// it; with whether a pattern matched.
    fn route_of(&self, id: &str) -> Option<(&Route, bool)> {
        if let Some(route) = self.routes.get(id) {
            return Some((route, false));
        }
        self.patterns.iter().find(|(pattern, _)| glob_matches(pattern, id)).map(|(_, route)| (route, true))
    }

    /// The route serving `id` and the name the call is sent under: the provider's name
    /// for the id, or the id itself when a pattern routes it.
    fn lookup<'a>(&'a self, id: &'a str) -> Option<(&'a Route, &'a str)> {
        self.route_of(id).map(|(route, by_pattern)| (route, if by_pattern { id } else { route.name.as_str() }))
    }

    /// The id a call runs on: the one it declares, else the default model.
    fn model_of<'a>(&'a self, declared: Option<&'a str>) -> Option<&'a str> {
        declared.map(str::trim).filter(|model| !model.is_empty()).or(self.default_model.as_deref())
    }
}

impl Router {
    /// Where a call to `id` goes: the adapter, the name it is sent under and the provider
    /// it is recorded under; `None` when nothing serves it.
    fn target<'a>(&'a self, id: &'a str) -> Option<(&'a dyn ModelAdapter, &'a str, &'a str)> {
        match (self.lookup(id), &self.default) {
            (Some((route, name)), _) => Some((route.adapter.as_ref(), name, route.provider.as_str())),
            (None, Some(default)) => Some((default.as_ref(), id, DEFAULT_PROVIDER)),
            (None, None) => None,
        }
    }

    /// Calls `first` (its route is `route`), then each of its fallbacks in order while the
    /// failures are passing ones and none of the answer's text was handed on.
    async fn call_with_fallbacks<'a>(
        &'a self,
        first: &'a str,
        route: &'a Route,
        request: ModelRequest<'a>,
    ) -> Result<ModelResponse, ModelError> {
        let shown = AtomicBool::new(false);
        let watcher = request.on_text;
        let forward = |text: &str, id: Option<&str>| {
            shown.store(true, Ordering::Relaxed);
            if let Some(sink) = watcher {
                sink.send(text, id);
            }
        };
        let candidates = std::iter::once(first).chain(route.fallbacks.iter().map(String::as_str));
        let mut failed: Vec<FailedCall> = Vec::new();
        let last = route.fallbacks.len();
        // The call's time budget covers every model tried, not each afresh.
        let deadline = request.timeout.map(|budget| (tokio::time::Instant::now() + budget, budget));
        for (index, id) in candidates.enumerate() {
            let timeout = match deadline {
                Some((end, budget)) => match end.checked_duration_since(tokio::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(ModelError::Timeout(budget)),
                },
                None => None,
            };
            let Some((adapter, name, provider)) = self.target(id) else {
                // `validate` refuses a fallback nothing serves; a runner started anyway
                // records it as a failed attempt and goes on to the next.
                failed.push(FailedCall {
                    model: id.to_string(),
                    provider: "none".to_string(),
                    error: "no route serves it and no default endpoint is configured".to_string(),
                });
                continue;
            };
            let attempt = ModelRequest {
                model: Some(name),
                on_text: watcher.map(|_| TextSink(&forward)),
                timeout,
                ..request.clone()
            };
            match adapter.call(attempt).await {
                Ok(mut response) => {
                    if index > 0 {
                        response.served_by = Some(id.to_string());
                    }
                    response.fallbacks = failed;
                    return Ok(response);
                }
                Err(error) => {
                    let go_on = index < last && error.calls_for_fallback() && !shown.load(Ordering::Relaxed);
                    // Nothing else was tried, or the time budget ran out (the turn loop
                    // tells a spent budget by its kind): the failure is the call's own.
                    if !go_on && (failed.is_empty() || matches!(error, ModelError::Timeout(_))) {
                        return Err(error);
                    }
                    failed.push(FailedCall {
                        model: id.to_string(),
                        provider: provider.to_string(),
                        error: error.to_string(),
                    });
                    if !go_on {
                        break;
                    }
                }
            }
        }
        Err(ModelError::Exhausted(failed))
    }
}

impl ModelAdapter for Router {
    fn call<'a>(&'a self, mut request: ModelRequest<'a>) -> ModelFuture<'a> {
        let model = self.model_of(request.model);
        if let Some(id) = model
            && let Some((route, name)) = self.lookup(id)
        {
            if !route.fallbacks.is_empty() {
                return Box::pin(self.call_with_fallbacks(id, route, request));
            }
            request.model = Some(name);
            return route.adapter.call(request);
        }
        match &self.default {
            Some(default) => default.call(request),
            None => {
                let routed: Vec<&str> = self
                    .routes
                    .keys()
                    .chain(self.patterns.iter().map(|(pattern, _)| pattern))
                    .map(String::as_str)
                    .collect();
                let message = match model {
                    Some(model) => format!(
                        "no route serves the model `{model}`: archmax.toml routes {}, and ARCHMAX_API_BASE_URL is not set for a default endpoint",
                        archmax_program::diagnostic::list_names(&routed)
                    ),
                    None => format!(
                        "no model for the {} call in state `{}` of workflow `{}`: set settings.model or ARCHMAX_MODEL",
                        request.role.as_str(),
                        request.state,
                        request.workflow
                    ),
                };
                Box::pin(async move { Err(ModelError::Configuration(message)) })
            }
        }
    }

    fn provider(&self, model: Option<&str>) -> &str {
        match (self.model_of(model).and_then(|id| self.route_of(id)), &self.default) {
            // An adapter names its own provider, whatever the model.
            (Some((route, _)), _) => route.adapter.provider(None),
            (None, Some(default)) => default.provider(model),
            (None, None) => "unknown",
        }
    }

    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        let id = self.model_of(model);
        match (id.and_then(|id| self.lookup(id)), &self.default) {
            (Some((route, name)), _) => route.adapter.cache_plan(Some(name), cache),
            (None, Some(default)) => default.cache_plan(model, cache),
            (None, None) => CachePlan::unmarked(cache),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// An adapter that answers with the name it was called under and which it is.
    struct Named {
        which: &'static str,
        asked: Mutex<Vec<Option<String>>>,
    }

    impl ModelAdapter for Named {
        fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
            self.asked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(request.model.map(str::to_string));
            let text = format!("{}:{}", self.which, request.model.unwrap_or("-"));
            Box::pin(async move { Ok(ModelResponse { text, ..ModelResponse::default() }) })
        }
    }

    fn named(which: &'static str) -> Arc<Named> {
        Arc::new(Named { which, asked: Mutex::default() })
    }

    async fn ask(router: &Router, model: Option<&str>) -> Result<String, ModelError> {
        let variables = json!({});
        let request = crate::model::bare_request(model, &variables);
        router.call(request).await.map(|answer| answer.text)
    }

    fn route(provider: &str, adapter: Arc<Named>, name: &str) -> Route {
        Route { provider: provider.to_string(), adapter, name: name.to_string(), fallbacks: Vec::new() }
    }

    #[tokio::test]
    async fn each_id_goes_to_its_provider_under_the_providers_name_and_the_rest_to_the_default() {
        let (claude, azure, default) = (named("claude"), named("azure"), named("default"));
        let routes = BTreeMap::from([
            ("claude-sonnet".to_string(), route("claude", claude.clone(), "claude-sonnet-4-5-20250929")),
            ("gpt-4.1".to_string(), route("azure", azure.clone(), "gpt-4.1")),
        ]);
        let router = Router::new(routes, Some(default.clone() as Arc<dyn ModelAdapter>), Some("claude-sonnet".into()));
        assert_eq!(
            ask(&router, Some("claude-sonnet")).await.ok().as_deref(),
            Some("claude:claude-sonnet-4-5-20250929")
        );
        assert_eq!(ask(&router, Some(" gpt-4.1 ")).await.ok().as_deref(), Some("azure:gpt-4.1"));
        assert_eq!(ask(&router, Some("o4-mini")).await.ok().as_deref(), Some("default:o4-mini"));
        // A call that names no model runs on the default model, routed like any other.
        assert_eq!(ask(&router, None).await.ok().as_deref(), Some("claude:claude-sonnet-4-5-20250929"));
        assert_eq!(default.asked.lock().map(|asked| asked.len()).unwrap_or_default(), 1);
    }

    #[tokio::test]
    async fn a_pattern_serves_the_ids_it_matches_under_their_own_names_after_exact_routes() {
        let (claude, haiku, exact) = (named("claude"), named("haiku"), named("exact"));
        let routes = BTreeMap::from([
            ("claude-*".to_string(), route("claude", claude.clone(), "claude-*")),
            ("claude-haiku-*".to_string(), route("haiku", haiku.clone(), "claude-haiku-*")),
            ("claude-opus-4-1".to_string(), route("exact", exact.clone(), "opus-on-bedrock")),
        ]);
        let router = Router::new(routes, None, None);
        assert_eq!(ask(&router, Some("claude-sonnet-4-5")).await.ok().as_deref(), Some("claude:claude-sonnet-4-5"));
        assert_eq!(ask(&router, Some("claude-haiku-4-5")).await.ok().as_deref(), Some("haiku:claude-haiku-4-5"));
        assert_eq!(ask(&router, Some("claude-opus-4-1")).await.ok().as_deref(), Some("exact:opus-on-bedrock"));
        match ask(&router, Some("gpt-4.1")).await {
            Err(ModelError::Configuration(message)) => assert!(message.contains("`claude-*`"), "{message}"),
            other => panic!("no route serves gpt-4.1, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn without_a_default_an_unrouted_id_fails_before_anything_is_sent() {
        let claude = named("claude");
        let routes = BTreeMap::from([("claude-sonnet".to_string(), route("claude", claude.clone(), "claude-sonnet"))]);
        let router = Router::new(routes, None, None);
        match ask(&router, Some("gpt-4.1")).await {
            Err(ModelError::Configuration(message)) => {
                assert!(message.contains("no route serves the model `gpt-4.1`"), "{message}");
                assert!(message.contains("`claude-sonnet`"), "{message}");
            }
            other => panic!("a configuration error, got {other:?}"),
        }
        assert!(
            matches!(ask(&router, None).await, Err(ModelError::Configuration(message)) if message.contains("no model"))
        );
        assert!(claude.asked.lock().is_ok_and(|asked| asked.is_empty()));
        let plan = router.cache_plan(Some("gpt-4.1"), PromptCache::default());
        assert_eq!(plan.strategy, "unsupported");
    }

    /// An adapter that answers each call with the next scripted outcome, showing `text`
    /// first when it has some; what it was asked under is kept.
    struct Scripted {
        outcomes: Mutex<Vec<(&'static str, Result<&'static str, ModelError>)>>,
        asked: Mutex<Vec<String>>,
    }

    impl ModelAdapter for Scripted {
        fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
            let mut outcomes = self.outcomes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.asked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(request.model.unwrap_or("-").to_string());
            let (shown, outcome) = if outcomes.is_empty() { ("", Ok("unscripted")) } else { outcomes.remove(0) };
            if let (false, Some(sink)) = (shown.is_empty(), request.on_text) {
                sink.send(shown, None);
            }
            let answer = outcome.map(|text| ModelResponse { text: text.to_string(), ..ModelResponse::default() });
            Box::pin(async move { answer })
        }
    }

    fn scripted(outcomes: Vec<(&'static str, Result<&'static str, ModelError>)>) -> Arc<Scripted> {
        Arc::new(Scripted { outcomes: Mutex::new(outcomes), asked: Mutex::default() })
    }

    fn asked(adapter: &Scripted) -> Vec<String> {
        adapter.asked.lock().map(|asked| asked.clone()).unwrap_or_default()
    }

    fn status(status: u16) -> ModelError {
        ModelError::Status { status, body: "busy".into() }
    }

    /// `gpt-4.1` on `openai`, falling back to `claude-sonnet` on `claude`, then to
    /// `llama` on the default adapter.
    fn fallback_router(openai: &Arc<Scripted>, claude: &Arc<Scripted>, default: Option<&Arc<Scripted>>) -> Router {
        let first = Route {
            provider: "openai".into(),
            adapter: openai.clone(),
            name: "gpt-4.1-2025".into(),
            fallbacks: vec!["claude-sonnet".into(), "llama".into()],
        };
        let second = Route {
            provider: "claude".into(),
            adapter: claude.clone(),
            name: "claude-sonnet-4-5".into(),
            fallbacks: vec!["gpt-4.1".into()],
        };
        let routes = BTreeMap::from([("gpt-4.1".to_string(), first), ("claude-sonnet".to_string(), second)]);
        Router::new(routes, default.map(|default| default.clone() as Arc<dyn ModelAdapter>), None)
    }

    async fn call_watched(router: &Router, model: &str) -> (Result<ModelResponse, ModelError>, String) {
        let variables = json!({});
        let seen = Mutex::new(String::new());
        let watch = |text: &str, _: Option<&str>| seen.lock().expect("the watcher's text").push_str(text);
        let request =
            ModelRequest { on_text: Some(TextSink(&watch)), ..crate::model::bare_request(Some(model), &variables) };
        let answer = router.call(request).await;
        let seen = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
        (answer, seen)
    }

    #[tokio::test]
    async fn a_passing_failure_goes_to_the_next_fallback_under_its_own_route() {
        let openai = scripted(vec![("", Err(status(429)))]);
        let claude = scripted(vec![("", Err(ModelError::Overloaded("mid-stream (overloaded_error)".into())))]);
        let default = scripted(vec![("Llama here.", Ok("Llama here."))]);
        let router = fallback_router(&openai, &claude, Some(&default));
        let (answer, seen) = call_watched(&router, "gpt-4.1").await;
        let answer = answer.expect("the last fallback answers");
        assert_eq!((answer.text.as_str(), seen.as_str()), ("Llama here.", "Llama here."));
        assert_eq!(answer.served_by.as_deref(), Some("llama"));
        let failed: Vec<(&str, &str)> =
            answer.fallbacks.iter().map(|call| (call.model.as_str(), call.provider.as_str())).collect();
        assert_eq!(failed, [("gpt-4.1", "openai"), ("claude-sonnet", "claude")]);
        assert!(answer.fallbacks[0].error.contains("429"), "{:?}", answer.fallbacks[0]);
        // Each is asked under its provider's name; the fallback's own list is not followed.
        assert_eq!(
            (asked(&openai), asked(&claude), asked(&default)),
            (vec!["gpt-4.1-2025".to_string()], vec!["claude-sonnet-4-5".to_string()], vec!["llama".to_string()])
        );

        // The first model answering leaves no trace of the others.
        let (answer, _) = call_watched(&router, "gpt-4.1").await;
        let answer = answer.expect("the first model answers");
        assert_eq!(
            (answer.text.as_str(), answer.served_by.as_deref(), answer.fallbacks.len()),
            ("unscripted", None, 0)
        );
    }

    #[tokio::test]
    async fn a_failure_another_provider_would_share_is_the_calls_own() {
        for error in [
            status(400),
            ModelError::ContentFilter("filtered".into()),
            ModelError::Response("not JSON".into()),
            ModelError::Timeout(std::time::Duration::from_secs(1)),
        ] {
            let expected = error.to_string();
            let (openai, claude) = (scripted(vec![("", Err(error))]), scripted(vec![]));
            let router = fallback_router(&openai, &claude, None);
            let (answer, _) = call_watched(&router, "gpt-4.1").await;
            let error = answer.expect_err("no fallback is tried");
            assert_eq!(error.to_string(), expected);
            assert!(asked(&claude).is_empty(), "{expected}: the fallback was called");
        }
    }

    #[tokio::test]
    async fn a_spent_time_budget_after_a_fallback_is_reported_as_such() {
        let openai = scripted(vec![("", Err(status(503)))]);
        let claude = scripted(vec![("", Err(ModelError::Timeout(std::time::Duration::from_secs(30))))]);
        let router = fallback_router(&openai, &claude, None);
        let (answer, _) = call_watched(&router, "gpt-4.1").await;
        assert!(
            matches!(answer, Err(ModelError::Timeout(_))),
            "the turn loop routes a timeout by its kind: {answer:?}"
        );
    }

    #[tokio::test]
    async fn each_model_tried_gets_what_is_left_of_the_calls_time_budget() {
        /// Fails with a 503 after 20 s, or times out first when its budget is shorter, as
        /// a live adapter does; keeps the budget it was given.
        struct Slow {
            budgets: Mutex<Vec<Option<std::time::Duration>>>,
        }
        impl ModelAdapter for Slow {
            fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
                self.budgets.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.timeout);
                let slow = std::time::Duration::from_secs(20);
                Box::pin(async move {
                    match request.timeout {
                        Some(budget) if budget < slow => {
                            tokio::time::sleep(budget).await;
                            Err(ModelError::Timeout(budget))
                        }
                        _ => {
                            tokio::time::sleep(slow).await;
                            Err(status(503))
                        }
                    }
                })
            }
        }
        tokio::time::pause();
        let slow = Arc::new(Slow { budgets: Mutex::default() });
        let first = Route {
            provider: "openai".into(),
            adapter: slow.clone(),
            name: "gpt-4.1".into(),
            fallbacks: vec!["claude-sonnet".into(), "llama".into()],
        };
        let second =
            Route { provider: "claude".into(), adapter: slow.clone(), name: "claude".into(), fallbacks: vec![] };
        let routes = BTreeMap::from([("gpt-4.1".to_string(), first), ("claude-sonnet".to_string(), second)]);
        let router = Router::new(routes, Some(slow.clone() as Arc<dyn ModelAdapter>), None);
        let variables = json!({});
        let request = ModelRequest {
            timeout: Some(std::time::Duration::from_secs(50)),
            ..crate::model::bare_request(Some("gpt-4.1"), &variables)
        };
        let answer = router.call(request).await;
        assert!(matches!(answer, Err(ModelError::Timeout(_))), "{answer:?}");
        let budgets: Vec<u64> = slow
            .budgets
            .lock()
            .map(|budgets| {
                budgets.iter().map(|budget| budget.map_or(0, |budget| budget.as_secs_f64().round() as u64)).collect()
            })
            .unwrap_or_default();
        // 50 s, then what the first 20 s left, then what 40 s left.
        assert_eq!(budgets, [50, 30, 10]);
    }

    #[tokio::test]
    async fn text_already_shown_is_never_followed_by_another_models() {
        let openai = scripted(vec![("Half an ans", Err(ModelError::Transport("cut".into())))]);
        let claude = scripted(vec![]);
        let router = fallback_router(&openai, &claude, None);
        let (answer, seen) = call_watched(&router, "gpt-4.1").await;
        assert!(matches!(answer, Err(ModelError::Transport(ref why)) if why == "cut"), "{answer:?}");
        assert_eq!(seen, "Half an ans");
        assert!(asked(&claude).is_empty());
    }

    #[tokio::test]
    async fn when_every_model_fails_the_error_names_each_attempt_in_order() {
        for server_error in [500, 503, 529, 408] {
            let openai = scripted(vec![("", Err(status(server_error)))]);
            let claude = scripted(vec![("", Err(status(400)))]);
            let router = fallback_router(&openai, &claude, None);
            let (answer, _) = call_watched(&router, "gpt-4.1").await;
            match answer {
                Err(ModelError::Exhausted(failed)) => {
                    // A refusal from the fallback stops the list there.
                    let tried: Vec<&str> = failed.iter().map(|call| call.model.as_str()).collect();
                    assert_eq!(tried, ["gpt-4.1", "claude-sonnet"]);
                }
                other => panic!("{server_error}: every model failed, got {other:?}"),
            }
        }
        // Without a default endpoint the last id is served by nothing, and says so.
        let openai = scripted(vec![("", Err(ModelError::Transport("connection refused".into())))]);
        let claude = scripted(vec![("", Err(status(429)))]);
        let router = fallback_router(&openai, &claude, None);
        let error = call_watched(&router, "gpt-4.1").await.0.expect_err("nothing answers");
        assert_eq!(
            error.to_string(),
            "the model `gpt-4.1` and its fallbacks all failed; tried `gpt-4.1` (openai): the model endpoint failed: connection refused; \
             then `claude-sonnet` (claude): the model endpoint answered 429: busy; \
             then `llama` (none): no route serves it and no default endpoint is configured"
        );
    }
}
