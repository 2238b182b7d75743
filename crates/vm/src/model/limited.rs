//! A bound on how many calls one provider is sent at once (`[providers.<name>]
//! max_concurrency`): a runner serving many sessions would otherwise open as many calls
//! as it has turns in flight, and a fleet of runners would stampede the provider into
//! its rate limits.
//!
//! The one thing to know: a call waits for a permit before it is sent and holds it until
//! its whole answer is in (retries included, since they are the adapter's own), so the
//! bound is on calls in flight, not on calls started per second. Waiting is not a
//! failure: a call that waits longer than its turn allows is cut like any slow call.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{CachePlan, ModelAdapter, ModelError, ModelFuture, ModelRequest, PromptCache};

/// An adapter sending at most `permits` calls at once; the rest wait in order.
pub struct Limited {
    inner: Arc<dyn ModelAdapter>,
    permits: Arc<Semaphore>,
}

impl Limited {
    pub fn new(inner: Arc<dyn ModelAdapter>, permits: u32) -> Limited {
        let permits = usize::try_from(permits.max(1)).unwrap_or(1);
        Limited { inner, permits: Arc::new(Semaphore::new(permits)) }
    }
}

impl ModelAdapter for Limited {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| ModelError::Configuration("the provider's call limit was closed".to_string()))?;
            self.inner.call(request).await
        })
    }

    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        self.inner.cache_plan(model, cache)
    }

    fn provider(&self, model: Option<&str>) -> &str {
        self.inner.provider(model)
    }

    fn leftover(&self) -> usize {
        self.inner.leftover()
    }

    fn report(&self) -> Option<String> {
        self.inner.report()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::model::ModelResponse;

    /// An adapter that counts the calls inside it at once and keeps the most it saw.
    #[derive(Default)]
    struct Counting {
        inside: AtomicUsize,
        most: AtomicUsize,
    }

    impl ModelAdapter for Counting {
        fn call<'a>(&'a self, _request: ModelRequest<'a>) -> ModelFuture<'a> {
            Box::pin(async move {
                let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                self.inside.fetch_sub(1, Ordering::SeqCst);
                Ok(ModelResponse::default())
            })
        }
    }

    static NO_VARIABLES: serde_json::Value = serde_json::Value::Null;

    fn request() -> ModelRequest<'static> {
        crate::model::bare_request(None, &NO_VARIABLES)
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_calls_than_the_limit_are_in_flight_and_every_call_is_answered() {
        let counting = Arc::new(Counting::default());
        let limited = Limited::new(Arc::clone(&counting) as Arc<dyn ModelAdapter>, 2);
        let calls = (0..7).map(|_| limited.call(request()));
        let answers = futures_util::future::join_all(calls).await;
        assert_eq!(answers.iter().filter(|answer| answer.is_ok()).count(), 7);
        assert_eq!(counting.most.load(Ordering::SeqCst), 2, "two at most, and two were used");
    }
}
