//! One QuickJS runtime and context under the sandbox's limits, the state its native
//! functions share with the evaluation in progress, and how a failure is classified.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::promise::PromiseState;
use rquickjs::{AsyncContext, AsyncRuntime, Coerced, Ctx, Exception, Module, Promise, Value};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use super::convert::{Console, display, error_text};
use super::{HostCall, Limits, SandboxError, bridge};

/// No deadline armed.
const UNARMED: u64 = u64::MAX;

/// Jobs run after an evaluation settled before it counts as finished; a script that keeps
/// queueing microtasks is stopped by the deadline long before this.
const MAX_DRAINED_JOBS: usize = 100_000;

/// How much later than the deadline the backstop timeout fires.
pub(crate) const BACKSTOP: Duration = Duration::from_millis(500);

/// What the native functions of one context share with the evaluation in progress.
pub(crate) struct Shared {
    origin: Instant,
    /// Nanoseconds after `origin`, or [`UNARMED`].
    deadline: AtomicU64,
    /// Set when the interrupt handler stopped the script.
    interrupted: AtomicBool,
    /// Between `begin` and `finish`: still set at the next `begin` when the caller dropped
    /// an evaluation half-way.
    in_flight: AtomicBool,
    state: Mutex<EvalState>,
    /// Bumped when an evaluation ends: host calls still waiting reject.
    epoch: watch::Sender<u64>,
}

/// Per evaluation: who answers tool calls, what may be called, what was printed.
#[derive(Default)]
pub(crate) struct EvalState {
    pub(crate) host: Option<UnboundedSender<HostCall>>,
    pub(crate) callable: Vec<String>,
    pub(crate) calls: u32,
    pub(crate) max_calls: Option<u32>,
    /// The call past `max_calls` was refused.
    pub(crate) exceeded: bool,
    pub(crate) console: Console,
    pub(crate) max_result_chars: usize,
    /// Import specifiers the resolver refused.
    pub(crate) refused: Vec<String>,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Shared {
            origin: Instant::now(),
            deadline: AtomicU64::new(UNARMED),
            interrupted: AtomicBool::new(false),
            in_flight: AtomicBool::new(false),
            state: Mutex::new(EvalState::default()),
            epoch: watch::Sender::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, EvalState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn nanos(&self, instant: Instant) -> u64 {
        u64::try_from(instant.saturating_duration_since(self.origin).as_nanos()).unwrap_or(UNARMED - 1)
    }

    pub(crate) fn deadline_passed(&self) -> bool {
        let deadline = self.deadline.load(Ordering::Relaxed);
        deadline != UNARMED && self.nanos(Instant::now()) >= deadline
    }

    /// The interrupt handler: stop the script once the deadline passed.
    pub(crate) fn should_interrupt(&self) -> bool {
        if self.deadline_passed() {
            self.interrupted.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    pub(crate) fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// A receiver that changes when the current evaluation ends.
    pub(crate) fn end_of_evaluation(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    /// Arms the deadline and resets the per-evaluation state; returns the deadline.
    pub(crate) fn begin(
        &self,
        limits: &Limits,
        callable: Vec<String>,
        host: Option<UnboundedSender<HostCall>>,
    ) -> Instant {
        {
            let mut state = self.lock();
            *state = EvalState {
                host,
                callable,
                max_calls: limits.max_calls,
                console: Console::new(limits.max_result_chars),
                max_result_chars: limits.max_result_chars,
                ..EvalState::default()
            };
        }
        self.interrupted.store(false, Ordering::Relaxed);
        self.in_flight.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + limits.timeout;
        self.deadline.store(self.nanos(deadline), Ordering::Relaxed);
        deadline
    }

    /// Disarms the deadline, rejects host calls still waiting, lets go of the host and
    /// returns what the console captured.
    pub(crate) fn finish(&self) -> Console {
        self.deadline.store(UNARMED, Ordering::Relaxed);
        self.in_flight.store(false, Ordering::Relaxed);
        self.epoch.send_modify(|epoch| *epoch = epoch.wrapping_add(1));
        let mut state = self.lock();
        state.host = None;
        state.callable.clear();
        std::mem::take(&mut state.console)
    }
}

/// A runtime and its one context, set up with the limits, the refusing loader and the
/// sandbox's globals.
pub(crate) struct Engine {
    pub(crate) context: AsyncContext,
    pub(crate) runtime: AsyncRuntime,
    pub(crate) shared: Arc<Shared>,
    /// The engine must be rebuilt before it runs anything else.
    pub(crate) poisoned: bool,
}

impl Engine {
    /// Whether the engine must be rebuilt first: marked so, or an evaluation was dropped
    /// half-way by its caller (its JavaScript frames were abandoned mid-flight).
    pub(crate) fn needs_rebuild(&self) -> bool {
        self.poisoned || self.shared.in_flight.load(Ordering::Relaxed)
    }
}

impl Engine {
    pub(crate) async fn new(limits: &Limits) -> Result<Engine, SandboxError> {
        let shared = Arc::new(Shared::new());
        let runtime = AsyncRuntime::new().map_err(|error| SandboxError::Internal(error.to_string()))?;
        if limits.memory_limit_bytes > 0 {
            runtime.set_memory_limit(limits.memory_limit_bytes).await;
        }
        runtime.set_max_stack_size(limits.max_stack_bytes).await;
        let watcher = Arc::clone(&shared);
        runtime.set_interrupt_handler(Some(Box::new(move || watcher.should_interrupt()))).await;
        runtime.set_loader(RefuseImports(Arc::clone(&shared)), RefuseImports(Arc::clone(&shared))).await;
        let context = AsyncContext::full(&runtime).await.map_err(|error| match error {
            rquickjs::Error::Allocation => SandboxError::OutOfMemory,
            error => SandboxError::Internal(error.to_string()),
        })?;
        let installer = Arc::clone(&shared);
        context
            .with(|ctx| {
                bridge::install(&ctx, &installer).map_err(|error| {
                    let detail =
                        if error.is_exception() { display_caught(&ctx, &installer) } else { error.to_string() };
                    SandboxError::Internal(format!("the sandbox globals could not be set up: {detail}"))
                })
            })
            .await?;
        Ok(Engine { context, runtime, shared, poisoned: false })
    }

    /// Settles an evaluation of a kept engine that ran under the backstop timeout: an
    /// evaluation the backstop abandoned leaves the engine untrusted (rebuilt before the
    /// next one), and an out-of-memory failure collects garbage first.
    pub(crate) async fn conclude<T>(
        &mut self,
        limits: &Limits,
        outcome: Result<Result<T, SandboxError>, tokio::time::error::Elapsed>,
    ) -> Result<T, SandboxError> {
        let outcome = outcome.unwrap_or_else(|_| {
            self.poisoned = true;
            Err(SandboxError::Timeout(limits.timeout))
        });
        if matches!(outcome, Err(SandboxError::OutOfMemory)) {
            self.recover_memory(limits).await;
        }
        outcome
    }

    /// After an out-of-memory failure: collect, and rebuild before the next evaluation
    /// if the heap is still more than half full (the script kept its garbage reachable).
    pub(crate) async fn recover_memory(&mut self, limits: &Limits) {
        self.runtime.run_gc().await;
        let used = usize::try_from(self.runtime.memory_usage().await.malloc_size).unwrap_or(usize::MAX);
        if limits.memory_limit_bytes > 0 && used > limits.memory_limit_bytes / 2 {
            self.poisoned = true;
        }
    }
}

fn display_caught(ctx: &Ctx<'_>, shared: &Shared) -> String {
    let thrown = ctx.catch();
    let mut partial = false;
    display(shared, &thrown, 2_000, &mut partial)
}

/// The loader: every module specifier is refused, naming it.
struct RefuseImports(Arc<Shared>);

impl Resolver for RefuseImports {
    fn resolve<'js>(
        &mut self,
        _ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        self.0.lock().refused.push(name.to_string());
        Err(rquickjs::Error::new_resolving_message(
            base,
            name,
            "the sandbox has no modules to import; scripts reach the outside only through tools.*",
        ))
    }
}

impl Loader for RefuseImports {
    fn load<'js>(
        &mut self,
        _ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        self.0.lock().refused.push(name.to_string());
        Err(rquickjs::Error::new_loading_message(name, "the sandbox loads no modules"))
    }
}

/// The message of the rejection a call past `max_calls` gets.
pub(crate) fn too_many_calls(max: u32) -> String {
    format!("maxPtcCalls exceeded: an evaluation may make at most {max} tool calls")
}

/// The sandbox error for a failed QuickJS operation.
pub(crate) fn failure(ctx: &Ctx<'_>, shared: &Shared, limits: &Limits, error: rquickjs::Error) -> SandboxError {
    match error {
        rquickjs::Error::Exception => {
            let thrown = ctx.catch();
            classify(shared, limits, &thrown)
        }
        _ if shared.interrupted() => {
            ctx.catch();
            SandboxError::Timeout(limits.timeout)
        }
        rquickjs::Error::Allocation => SandboxError::OutOfMemory,
        error => SandboxError::Internal(error.to_string()),
    }
}

/// The sandbox error for a thrown value (or a rejection reason).
pub(crate) fn classify(shared: &Shared, limits: &Limits, thrown: &Value<'_>) -> SandboxError {
    if shared.interrupted() {
        return SandboxError::Timeout(limits.timeout);
    }
    let Some(error) = thrown.as_object().and_then(|object| Exception::from_object(object.clone())) else {
        let mut partial = false;
        let message = display(shared, thrown, limits.max_result_chars, &mut partial);
        return SandboxError::Thrown { message, stack: None };
    };
    let name = error.get::<_, Coerced<String>>("name").map(|name| name.0).unwrap_or_default();
    let message = error.message().unwrap_or_default();
    match (name.as_str(), message.as_str()) {
        ("InternalError", "out of memory") => return SandboxError::OutOfMemory,
        ("RangeError", "Maximum call stack size exceeded") => return SandboxError::StackOverflow,
        ("ReferenceError", text) if text.starts_with("Error resolving module '") => {
            let named = text["Error resolving module '".len()..].split('\'').next().unwrap_or_default();
            let refused = shared.lock().refused.first().cloned();
            return SandboxError::ForbiddenImport(refused.unwrap_or_else(|| named.to_string()));
        }
        _ => {}
    }
    {
        let state = shared.lock();
        if let Some(max) = state.max_calls
            && state.exceeded
            && message == too_many_calls(max)
        {
            return SandboxError::TooManyCalls(max);
        }
    }
    let stack = error.stack().filter(|stack| !stack.trim().is_empty());
    SandboxError::Thrown { message: error_text(&error), stack }
}

/// Waits for `promise` to settle, until `deadline`. The promise's state is read directly
/// (its `then` is never called); progress comes from the jobs and host-call futures the
/// context runs between polls.
pub(crate) async fn settle<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    limits: &Limits,
    promise: &Promise<'js>,
    deadline: Instant,
) -> Result<Value<'js>, SandboxError> {
    let watch = poll_fn(|_| {
        if shared.interrupted() {
            return Poll::Ready(Err(None));
        }
        match promise.state() {
            PromiseState::Pending => Poll::Pending,
            PromiseState::Resolved | PromiseState::Rejected => match promise.result::<Value>() {
                Some(Ok(value)) => Poll::Ready(Ok(value)),
                Some(Err(error)) => Poll::Ready(Err(Some(error))),
                None => Poll::Pending,
            },
        }
    });
    match tokio::time::timeout_at(deadline.into(), watch).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(Some(error))) => Err(failure(ctx, shared, limits, error)),
        Ok(Err(None)) | Err(_) => {
            ctx.catch();
            Err(SandboxError::Timeout(limits.timeout))
        }
    }
}

/// Runs the jobs an evaluation left queued, under its deadline; `Err` if the deadline
/// stopped them.
pub(crate) fn drain(ctx: &Ctx<'_>, shared: &Shared, limits: &Limits) -> Result<(), SandboxError> {
    for _ in 0..MAX_DRAINED_JOBS {
        if !ctx.execute_pending_job() {
            break;
        }
    }
    if shared.interrupted() {
        ctx.catch();
        return Err(SandboxError::Timeout(limits.timeout));
    }
    Ok(())
}
