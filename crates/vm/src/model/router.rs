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
        let routes: BTreeMap<&str, (&str, &str)> =
            self.routes.iter().map(|(id, route)| (id.as_str(), (route.provider.as_str(), route.name.as_str()))).collect();
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

    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        let id = self.model_of(model);
        match (id.and_then(|id| self.routes.get(id)), &self.default) {
            (Some(route), _) => route.adapter.cache_plan(Some(&route.name), cache),
            (None, Some(default)) => default.cache_plan(model, cache),
            (None, None) => CachePlan::unmarked(cache),
        }
    }
}
