//! The three ways to run JavaScript: the REPL ([`Sandbox::eval`]), a code state in a
//! fresh context ([`Sandbox::run_module`]) and a code state kept warm ([`CodeStateRunner`]).

use std::sync::Arc;
use std::time::Instant;

use rquickjs::context::EvalOptions;
use rquickjs::{Ctx, Function, Module, Object, Promise, Value};
use tokio::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

use archmax_program::script::{forbidden_imports, strip_harness_imports};

use super::bridge::{Handles, Scope, bind};
use super::convert::{Walk, WalkError, display, field, to_js, truncate};
use super::engine::{BACKSTOP, Engine, Shared, drain, failure, settle};
use super::{Bridge, EvalOutput, HostCall, Limits, Mode, ModuleOutput, SandboxError};

/// A code state's return value may hold at most this many values.
const MAX_OUTPUT_NODES: usize = 1_000_000;

/// The session's REPL: one QuickJS runtime and context that `archmax_eval` and
/// `archmax_run` share, so what one evaluation defines the next one sees. Evaluations are
/// serialized. After a limit error the REPL stays usable; it is rebuilt (its globals
/// lost) only when it cannot be trusted: the heap still full after an out-of-memory
/// error, or an evaluation abandoned by the backstop timeout.
pub struct Sandbox {
    limits: Limits,
    engine: Mutex<Engine>,
}

impl Sandbox {
    pub async fn new(limits: Limits) -> Result<Sandbox, SandboxError> {
        let engine = Engine::new(&limits).await?;
        Ok(Sandbox { limits, engine: Mutex::new(engine) })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// `archmax_eval`: runs `code` in the REPL (sloppy-mode script, top-level `await`
    /// allowed) and returns its last expression's value. `args` becomes the global `args`
    /// (`null` reads as `{}`); `tools` is re-scoped to `bridge` (in [`Mode::Ptc`]) first.
    pub async fn eval(
        &self,
        code: &str,
        bridge: &Bridge,
        args: serde_json::Value,
        host: UnboundedSender<HostCall>,
    ) -> Result<EvalOutput, SandboxError> {
        self.eval_named("eval", code, bridge, args, host).await
    }

    /// [`Sandbox::eval`] with a script name for stack traces (`archmax_run` passes the
    /// script's path).
    pub async fn eval_named(
        &self,
        name: &str,
        code: &str,
        bridge: &Bridge,
        args: serde_json::Value,
        host: UnboundedSender<HostCall>,
    ) -> Result<EvalOutput, SandboxError> {
        let source = strip_harness_imports(code);
        if let Some(import) = forbidden_imports(&source).into_iter().next() {
            return Err(SandboxError::ForbiddenImport(import.specifier));
        }
        let scope = Scope::new(bridge, Mode::Ptc);
        let limits = &self.limits;
        let mut engine = self.engine.lock().await;
        if engine.needs_rebuild() {
            *engine = Engine::new(limits).await?;
        }
        let shared = Arc::clone(&engine.shared);
        let deadline = shared.begin(limits, scope.callable(), Some(host));
        let work = engine.context.async_with(async |ctx: Ctx<'_>| {
            evaluate(&ctx, &shared, limits, name, &source, &scope, &args, deadline).await
        });
        let outcome = tokio::time::timeout(limits.timeout + BACKSTOP, work).await;
        let console = shared.finish();
        let outcome = engine.conclude(limits, outcome).await;
        let (value, cut) = outcome?;
        Ok(EvalOutput { value, console: console.lines, truncated: cut || console.truncated })
    }

    /// A code state, cold: a fresh runtime and context, the module loaded from
    /// `bytecode`, its default export called with `input` (an object such as
    /// `{ state, trigger, variables }`, to which `tools` is added; it is also the global
    /// `args`), and the returned value or promise awaited.
    ///
    /// `bytecode` must come from `archmax_program::script::module_bytecode` (the
    /// same QuickJS build): QuickJS trusts bytecode it is handed.
    pub async fn run_module(
        limits: &Limits,
        name: &str,
        bytecode: &[u8],
        input: serde_json::Value,
        bridge: &Bridge,
        host: UnboundedSender<HostCall>,
    ) -> Result<ModuleOutput, SandboxError> {
        let (value, console) = Sandbox::run_module_logged(limits, name, bytecode, input, bridge, host).await;
        Ok(ModuleOutput { value: value?, console })
    }

    /// [`Sandbox::run_module`], keeping what the script logged even when it failed.
    pub async fn run_module_logged(
        limits: &Limits,
        name: &str,
        bytecode: &[u8],
        input: serde_json::Value,
        bridge: &Bridge,
        host: UnboundedSender<HostCall>,
    ) -> (Result<serde_json::Value, SandboxError>, Vec<String>) {
        let engine = match Engine::new(limits).await {
            Ok(engine) => engine,
            Err(error) => return (Err(error), Vec::new()),
        };
        let scope = Scope::new(bridge, Mode::CodeState);
        let shared = Arc::clone(&engine.shared);
        let deadline = shared.begin(limits, scope.callable(), Some(host));
        let work = engine.context.async_with(async |ctx: Ctx<'_>| {
            let outcome = async {
                let tools = bind(&ctx, &shared, &scope).map_err(|error| failure(&ctx, &shared, limits, error))?;
                let entry = load(&ctx, &shared, limits, name, bytecode, deadline).await?;
                invoke(&ctx, &shared, limits, &entry, tools, &input, deadline).await
            }
            .await;
            finished(&ctx, &shared, limits, outcome)
        });
        let outcome = tokio::time::timeout(limits.timeout + BACKSTOP, work)
            .await
            .unwrap_or(Err(SandboxError::Timeout(limits.timeout)));
        let console = shared.finish();
        (outcome, console.lines)
    }
}

/// A code state kept warm, for states run again and again (benchmarks, a hot loop of
/// automated states).
///
/// "Warm" means: the runtime, the context, the loaded and evaluated module and the
/// `tools` binding are built once by [`CodeStateRunner::new`]; each
/// [`CodeStateRunner::run`] only converts the input, calls the default export again and
/// awaits it. The module's own top-level state therefore survives from one run to the
/// next, unlike [`Sandbox::run_module`] (the spec's "fresh REPL per run"); use it only
/// for scripts whose default export does not depend on module-level mutable state. The
/// limits apply to every run; during module evaluation (in `new`) no host is attached,
/// so a top-level tool call rejects.
pub struct CodeStateRunner {
    limits: Limits,
    name: String,
    bytecode: Vec<u8>,
    scope: Scope,
    callable: Vec<String>,
    engine: Mutex<Engine>,
}

impl CodeStateRunner {
    pub async fn new(limits: Limits, name: &str, bytecode: &[u8], bridge: &Bridge) -> Result<Self, SandboxError> {
        let scope = Scope::new(bridge, Mode::CodeState);
        let engine = Self::build(&limits, name, bytecode, &scope).await?;
        Ok(CodeStateRunner {
            callable: scope.callable(),
            limits,
            name: name.to_string(),
            bytecode: bytecode.to_vec(),
            scope,
            engine: Mutex::new(engine),
        })
    }

    async fn build(limits: &Limits, name: &str, bytecode: &[u8], scope: &Scope) -> Result<Engine, SandboxError> {
        let engine = Engine::new(limits).await?;
        let shared = Arc::clone(&engine.shared);
        let deadline = shared.begin(limits, Vec::new(), None);
        let work = engine.context.async_with(async |ctx: Ctx<'_>| {
            let outcome = async {
                let tools = bind(&ctx, &shared, scope).map_err(|error| failure(&ctx, &shared, limits, error))?;
                let entry = load(&ctx, &shared, limits, name, bytecode, deadline).await?;
                let mut handles = Handles::get(&ctx).map_err(|error| failure(&ctx, &shared, limits, error))?;
                handles.tools = tools;
                handles.entry = Some(entry);
                handles.store(&ctx).map_err(|error| failure(&ctx, &shared, limits, error))
            }
            .await;
            finished(&ctx, &shared, limits, outcome)
        });
        let outcome = tokio::time::timeout(limits.timeout + BACKSTOP, work)
            .await
            .unwrap_or(Err(SandboxError::Timeout(limits.timeout)));
        shared.finish();
        outcome.map(|()| engine)
    }

    /// Calls the default export with `input` (plus `tools`) and awaits its result.
    pub async fn run(
        &self,
        input: serde_json::Value,
        host: UnboundedSender<HostCall>,
    ) -> Result<ModuleOutput, SandboxError> {
        let limits = &self.limits;
        let mut engine = self.engine.lock().await;
        if engine.needs_rebuild() {
            *engine = Self::build(limits, &self.name, &self.bytecode, &self.scope).await?;
        }
        let shared = Arc::clone(&engine.shared);
        let deadline = shared.begin(limits, self.callable.clone(), Some(host));
        let work = engine.context.async_with(async |ctx: Ctx<'_>| {
            let outcome = async {
                let handles = Handles::get(&ctx).map_err(|error| failure(&ctx, &shared, limits, error))?;
                let entry =
                    handles.entry.ok_or_else(|| SandboxError::Internal("the module was not loaded".to_string()))?;
                invoke(&ctx, &shared, limits, &entry, handles.tools, &input, deadline).await
            }
            .await;
            finished(&ctx, &shared, limits, outcome)
        });
        let outcome = tokio::time::timeout(limits.timeout + BACKSTOP, work).await;
        let console = shared.finish();
        let outcome = engine.conclude(limits, outcome).await;
        Ok(ModuleOutput { value: outcome?, console: console.lines })
    }
}

/// Runs what the evaluation left queued (under its deadline) and settles the outcome: an
/// outcome that failed stays failed; one that succeeded fails if its leftovers overran.
fn finished<T>(
    ctx: &Ctx<'_>,
    shared: &Shared,
    limits: &Limits,
    outcome: Result<T, SandboxError>,
) -> Result<T, SandboxError> {
    let drained = drain(ctx, shared, limits);
    let value = outcome?;
    drained?;
    Ok(value)
}

#[allow(clippy::too_many_arguments)]
async fn evaluate<'js>(
    ctx: &Ctx<'js>,
    shared: &Arc<Shared>,
    limits: &Limits,
    name: &str,
    source: &str,
    scope: &Scope,
    args: &serde_json::Value,
    deadline: Instant,
) -> Result<(String, bool), SandboxError> {
    let fail = |error| failure(ctx, shared, limits, error);
    let outcome = async {
        bind(ctx, shared, scope).map_err(fail)?;
        let args = match args {
            serde_json::Value::Null => Object::new(ctx.clone()).map(Object::into_value),
            args => to_js(ctx, args),
        }
        .map_err(fail)?;
        Handles::get(ctx).and_then(|handles| handles.set_args(args)).map_err(fail)?;
        let promise: Promise = ctx.eval_with_options(source, script_options(name)).map_err(fail)?;
        let completion = settle(ctx, shared, limits, &promise, deadline).await?;
        // A top-level-await script completes with `{ value }`.
        let value: Value = match completion.as_object() {
            Some(object) => object.get("value").map_err(fail)?,
            None => completion,
        };
        let mut partial = false;
        let text = display(shared, &value, limits.max_result_chars, &mut partial);
        if shared.interrupted() {
            return Err(SandboxError::Timeout(limits.timeout));
        }
        let (text, cut) = truncate(text, limits.max_result_chars);
        Ok((text, cut || partial))
    }
    .await;
    finished(ctx, shared, limits, outcome)
}

fn script_options(name: &str) -> EvalOptions {
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.promise = true;
    options.filename = Some(name.to_string());
    options
}

/// Loads and evaluates the module; returns its default-export function.
async fn load<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    limits: &Limits,
    name: &str,
    bytecode: &[u8],
    deadline: Instant,
) -> Result<Function<'js>, SandboxError> {
    // SAFETY: `bytecode` is module bytecode written by `module_bytecode` with this
    // QuickJS build (the documented contract of every public entry point here). A
    // program's bytecode is either compiled in this process or loaded by
    // `artifact::load`, which keeps an artifact's bytecode only when a trusted key signed
    // it and otherwise recompiles every script from the source the artifact carries.
    let declared = unsafe { Module::load(ctx.clone(), bytecode) }.map_err(|error| match error {
        rquickjs::Error::Exception => failure(ctx, shared, limits, error),
        error => SandboxError::Internal(format!("`{name}` is not loadable module bytecode: {error}")),
    })?;
    let (module, evaluated) = declared.eval().map_err(|error| failure(ctx, shared, limits, error))?;
    settle(ctx, shared, limits, &evaluated, deadline).await?;
    let export: Value = module.get("default").map_err(|error| failure(ctx, shared, limits, error))?;
    export.into_function().ok_or(SandboxError::NoDefaultExport)
}

/// Calls the default export with `input` plus `tools` and awaits what it returns.
async fn invoke<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    limits: &Limits,
    entry: &Function<'js>,
    tools: Object<'js>,
    input: &serde_json::Value,
    deadline: Instant,
) -> Result<serde_json::Value, SandboxError> {
    let fail = |error| failure(ctx, shared, limits, error);
    let argument = match input {
        serde_json::Value::Object(_) => to_js(ctx, input),
        _ => Object::new(ctx.clone()).map(Object::into_value),
    }
    .map_err(fail)?;
    if let Some(object) = argument.as_object() {
        object.prop("tools", field(tools)).map_err(fail)?;
    }
    Handles::get(ctx).and_then(|handles| handles.set_args(argument.clone())).map_err(fail)?;
    let returned: Value = entry.call((argument,)).map_err(fail)?;
    let returned = match returned.as_promise() {
        Some(promise) => settle(ctx, shared, limits, promise, deadline).await?,
        None => returned,
    };
    match Walk::strict(shared, MAX_OUTPUT_NODES).json(&returned) {
        Ok(json) => Ok(json.unwrap_or(serde_json::Value::Null)),
        Err(WalkError::Deadline) => Err(SandboxError::Timeout(limits.timeout)),
        Err(WalkError::Js(error)) => Err(fail(error)),
        Err(WalkError::Refused(reason)) => Err(SandboxError::Thrown {
            message: format!("the default export's return value has no JSON form: {reason}"),
            stack: None,
        }),
    }
}
