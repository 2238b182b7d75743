//! Routing by model id: one adapter per provider of `archmax.toml`, each model id sent to
//! the provider its `[models."<id>"]` entry names, under the provider's own name for it.
//!
//! The one thing to know: an id no entry routes goes to the default adapter (the
//! endpoint of the `ARCHMAX_API_*` variables), unchanged; without one, the call fails
//! with a configuration error naming the id, before anything is sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{CachePlan, ModelAdapter, ModelError, ModelFuture, ModelRequest, PromptCache};

/// Where one model id goes.
#[derive(Clone)]
pub struct Route {
    /// The provider's table name, for messages.
    pub provider: String,
    pub adapter: Arc<dyn ModelAdapter>,
    /// The provider's own name for the model.
    pub name: String,
}

/// An adapter that sends each call to the adapter serving its model id.
pub struct Router {
    routes: BTreeMap<String, Route>,
    default: Option<Arc<dyn ModelAdapter>>,
    /// The model a call that names none runs on (`ARCHMAX_MODEL`).
    default_model: Option<String>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: BTreeMap<&str, (&str, &str)> = self
            .routes
            .iter()
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
        Router { routes, default, default_model }
    }

    /// The id a call runs on: the one it declares, else the default model.
    fn model_of<'a>(&'a self, declared: Option<&'a str>) -> Option<&'a str> {
        declared.map(str::trim).filter(|model| !model.is_empty()).or(self.default_model.as_deref())
    }
}

impl ModelAdapter for Router {
    fn call<'a>(&'a self, mut request: ModelRequest<'a>) -> ModelFuture<'a> {
        let model = self.model_of(request.model);
        if let Some(route) = model.and_then(|model| self.routes.get(model)) {
            request.model = Some(route.name.as_str());
            return route.adapter.call(request);
        }
        match &self.default {
            Some(default) => default.call(request),
            None => {
                let routed: Vec<&str> = self.routes.keys().map(String::as_str).collect();
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
        match (self.model_of(model).and_then(|id| self.routes.get(id)), &self.default) {
            (Some(route), _) => route.adapter.provider(Some(&route.name)),
            (None, Some(default)) => default.provider(model),
            (None, None) => "unknown",
        }
    }

    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        let id = self.model_of(model);
        match (id.and_then(|id| self.routes.get(id)), &self.default) {
            (Some(route), _) => route.adapter.cache_plan(Some(&route.name), cache),
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
    use crate::model::{ModelResponse, Role, Sampling};

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
        let request = ModelRequest {
            model,
            role: Role::Agent,
            session: "s1",
            workflow: "support",
            state: "triage",
            variables: &variables,
            system_static: "",
            system_volatile: "",
            messages: &[],
            history: 0,
            tools: &[],
            prompt_cache: PromptCache::default(),
            timeout: None,
            sampling: Sampling::default(),
            tape: None,
            on_text: None,
        };
        router.call(request).await.map(|answer| answer.text)
    }

    fn route(provider: &str, adapter: Arc<Named>, name: &str) -> Route {
        Route { provider: provider.to_string(), adapter, name: name.to_string() }
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
}
