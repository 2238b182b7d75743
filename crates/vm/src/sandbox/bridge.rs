//! The script-facing globals, all native: the `tools` proxy (its traps and its tool
//! functions), the captured `console`, and `args`.
//!
//! `tools`, `console` and `args` are non-configurable properties of the global object, so
//! a script can neither delete nor shadow them (`let tools` is a redeclaration error), and
//! `tools`/`console` cannot be reassigned. `tools` is one proxy for the context's life;
//! what it shows lives on its handler (a null-prototype object no script can reach) and
//! is replaced at the start of every evaluation. The traps read only null-prototype
//! objects, so rewriting built-in prototypes cannot change what they answer.
//!
//! No JavaScript value is captured by a Rust closure here: closures hold only
//! `Arc<Shared>` and strings, and what the Rust side keeps lives in the context's
//! userdata. A reference cycle through a closure would be invisible to QuickJS's
//! collector and abort the process when the runtime is freed.

use std::sync::Arc;

use rquickjs::function::{Opt, Rest, This};
use rquickjs::object::{Accessor, Property};
use rquickjs::proxy::ProxyHandler;
use rquickjs::{Ctx, Exception, Function, JsLifetime, Object, Promise, Proxy, Value};
use tokio::sync::oneshot;

use super::convert::{Walk, WalkError, display, field};
use super::engine::{Shared, too_many_calls};
use super::{Bridge, HostCall, Mode, camel_case, on_bridge};

/// A tool call's argument may hold at most this many values.
const MAX_ARGUMENT_NODES: usize = 1_000_000;

/// Keys on the proxy handler (none is a trap name): camelCase name → tool function,
/// camelCase name → `true` when visible, the visible names as an array-like, and what the
/// global `args` reads.
const TABLE: &str = "table";
const SHOWN: &str = "shown";
const NAMES: &str = "names";
const ARGS: &str = "args";

/// What the Rust side keeps of a context: the `tools` proxy, its handler and, for a warm
/// code state, the module's default export.
pub(crate) struct Handles<'js> {
    pub(crate) tools: Object<'js>,
    handler: Object<'js>,
    pub(crate) entry: Option<Function<'js>>,
}

// SAFETY: `Handles` only holds JavaScript values of the one lifetime `'js`.
unsafe impl<'js> JsLifetime<'js> for Handles<'js> {
    type Changed<'to> = Handles<'to>;
}

impl<'js> Handles<'js> {
    pub(crate) fn get(ctx: &Ctx<'js>) -> rquickjs::Result<Handles<'js>> {
        let handles = ctx.userdata::<Handles<'js>>().ok_or(rquickjs::Error::Unknown)?;
        Ok(Handles { tools: handles.tools.clone(), handler: handles.handler.clone(), entry: handles.entry.clone() })
    }

    pub(crate) fn store(self, ctx: &Ctx<'js>) -> rquickjs::Result<()> {
        ctx.store_userdata(self).map(drop).map_err(|_| rquickjs::Error::Unknown)
    }

    /// What the global `args` reads from now on.
    pub(crate) fn set_args(&self, args: Value<'js>) -> rquickjs::Result<()> {
        self.handler.prop(ARGS, field(args))
    }
}

/// Defines `tools`, `console` and `args` on the global object and keeps the handles.
pub(crate) fn install<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>) -> rquickjs::Result<()> {
    let handler = Object::new_proto(ctx.clone(), None)?;
    let empty = Object::new_proto(ctx.clone(), None)?;
    let no_names = Object::new_proto(ctx.clone(), None)?;
    no_names.prop("length", field(0u32))?;
    handler.prop(TABLE, field(empty.clone()))?;
    handler.prop(SHOWN, field(empty))?;
    handler.prop(NAMES, field(no_names))?;
    handler.prop(ARGS, field(Value::new_undefined(ctx.clone())))?;
    traps(ctx, &handler)?;
    let target = Object::new_proto(ctx.clone(), None)?;
    let tools = Proxy::new(ctx.clone(), target, ProxyHandler::from_object(handler.clone())?)?
        .into_value()
        .into_object()
        .ok_or(rquickjs::Error::Unknown)?;

    let globals = ctx.globals();
    globals.prop("tools", Property::from(tools.clone()))?;
    globals.prop("console", Property::from(console(ctx, shared)?))?;
    globals.prop(
        "args",
        Accessor::new_get(|ctx: Ctx<'js>| -> rquickjs::Result<Value<'js>> { Handles::get(&ctx)?.handler.get(ARGS) }),
    )?;
    Handles { tools, handler, entry: None }.store(ctx)
}

/// Whether `key` is a visible tool name on `handler`.
fn visible<'js>(handler: &Object<'js>, key: &Value<'js>) -> rquickjs::Result<bool> {
    if !key.is_string() {
        return Ok(false);
    }
    let shown: Object = handler.get(SHOWN)?;
    Ok(shown.get::<_, Value>(key.clone())?.as_bool() == Some(true))
}

/// The proxy traps. `this` is the handler, so no closure holds a JavaScript value.
fn traps<'js>(ctx: &Ctx<'js>, handler: &Object<'js>) -> rquickjs::Result<()> {
    let get = Function::new(
        ctx.clone(),
        |This(handler): This<Object<'js>>, _target: Value<'js>, key: Value<'js>| -> rquickjs::Result<Value<'js>> {
            if !key.is_string() {
                return Ok(Value::new_undefined(handler.ctx().clone()));
            }
            handler.get::<_, Object>(TABLE)?.get(key)
        },
    )?;
    let has = Function::new(ctx.clone(), |This(handler): This<Object<'js>>, _target: Value<'js>, key: Value<'js>| {
        visible(&handler, &key)
    })?;
    let own_keys = Function::new(ctx.clone(), |This(handler): This<Object<'js>>| -> rquickjs::Result<Value<'js>> {
        handler.get(NAMES)
    })?;
    let descriptor = Function::new(
        ctx.clone(),
        |This(handler): This<Object<'js>>, _target: Value<'js>, key: Value<'js>| -> rquickjs::Result<Value<'js>> {
            let ctx = handler.ctx().clone();
            if !visible(&handler, &key)? {
                return Ok(Value::new_undefined(ctx));
            }
            let function: Value = handler.get::<_, Object>(TABLE)?.get(key)?;
            let descriptor = Object::new_proto(ctx, None)?;
            descriptor.prop("value", field(function))?;
            descriptor.prop("writable", field(false))?;
            descriptor.prop("enumerable", field(true))?;
            descriptor.prop("configurable", field(true))?;
            Ok(descriptor.into_value())
        },
    )?;
    handler.prop("get", field(get))?;
    handler.prop("has", field(has))?;
    handler.prop("ownKeys", field(own_keys))?;
    handler.prop("getOwnPropertyDescriptor", field(descriptor))?;
    for refused in ["set", "defineProperty", "deleteProperty", "preventExtensions", "setPrototypeOf"] {
        handler.prop(refused, field(Function::new(ctx.clone(), || false)?))?;
    }
    Ok(())
}

/// The native `console`: each level formats its arguments into one captured line.
fn console<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>) -> rquickjs::Result<Object<'js>> {
    let console = Object::new(ctx.clone())?;
    for level in ["log", "info", "warn", "error", "debug"] {
        let shared = Arc::clone(shared);
        let function = Function::new(ctx.clone(), move |values: Rest<Value<'js>>| {
            let budget = shared.lock().max_result_chars;
            let mut partial = false;
            let parts: Vec<String> =
                values.0.iter().map(|value| display(&shared, value, budget, &mut partial)).collect();
            shared.lock().console.push(parts.join(" "));
        })?
        .with_name(level)?;
        console.prop(level, Property::from(function).enumerable())?;
    }
    Ok(console)
}

/// The tools one evaluation may reach, after the mode's exclusions: camelCase name, real
/// name, visible or not. The first real name of a camelCase name wins.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    entries: Vec<(String, String, bool)>,
}

impl Scope {
    pub(crate) fn new(bridge: &Bridge, mode: Mode) -> Scope {
        let mut entries: Vec<(String, String, bool)> = Vec::new();
        let named =
            bridge.visible.iter().map(|name| (name, true)).chain(bridge.callable.iter().map(|name| (name, false)));
        for (name, visible) in named {
            if !on_bridge(name, mode) {
                continue;
            }
            let camel = camel_case(name);
            if camel.is_empty() || entries.iter().any(|(known, _, _)| *known == camel) {
                continue;
            }
            entries.push((camel, name.clone(), visible));
        }
        // The spec's own names resolve too (`tools.archmax_advance`, `tools.read_file`),
        // without being listed: scripts are written both ways.
        let aliases: Vec<(String, String, bool)> = entries
            .iter()
            .filter(|(camel, real, _)| camel != real)
            .map(|(_, real, _)| (real.clone(), real.clone(), false))
            .collect();
        for alias in aliases {
            if !entries.iter().any(|(known, _, _)| *known == alias.0) {
                entries.push(alias);
            }
        }
        Scope { entries }
    }

    /// The real names a call may name.
    pub(crate) fn callable(&self) -> Vec<String> {
        self.entries.iter().map(|(_, real, _)| real.clone()).collect()
    }
}

/// Points `tools` at `scope`: the same proxy object, a new table behind it.
pub(crate) fn bind<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>, scope: &Scope) -> rquickjs::Result<Object<'js>> {
    let handles = Handles::get(ctx)?;
    let table = Object::new_proto(ctx.clone(), None)?;
    let shown = Object::new_proto(ctx.clone(), None)?;
    let names = Object::new_proto(ctx.clone(), None)?;
    let mut count = 0u32;
    for (camel, real, visible) in &scope.entries {
        let function = tool(ctx, shared, real)?.with_name(camel)?;
        table.prop(camel.as_str(), Property::from(function))?;
        if *visible {
            shown.prop(camel.as_str(), Property::from(true))?;
            names.prop(count, Property::from(camel.as_str()))?;
            count += 1;
        }
    }
    names.prop("length", Property::from(count))?;
    handles.handler.prop(TABLE, field(table))?;
    handles.handler.prop(SHOWN, field(shown))?;
    handles.handler.prop(NAMES, field(names))?;
    Ok(handles.tools)
}

/// One native tool function: `tools.readFile(args)` → a promise of the result text.
fn tool<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>, real: &str) -> rquickjs::Result<Function<'js>> {
    let shared = Arc::clone(shared);
    let real = real.to_string();
    Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Opt<Value<'js>>| call(&ctx, &shared, &real, args.0))
}

/// Sends the host call (at once, so concurrent calls are all in flight before any is
/// answered) and returns its promise; every refusal is a rejection, never a throw.
fn call<'js>(
    ctx: &Ctx<'js>,
    shared: &Arc<Shared>,
    tool: &str,
    args: Option<Value<'js>>,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = ctx.promise()?;
    let (receiver, mut ended) = match send(ctx, shared, tool, args) {
        Ok(sent) => sent,
        Err(reason) => {
            reject.call::<_, ()>((tool_error(ctx, tool, &reason)?,))?;
            return Ok(promise);
        }
    };
    let context = ctx.clone();
    let tool = tool.to_string();
    ctx.spawn(async move {
        let answer = tokio::select! {
            biased;
            reply = receiver => reply.unwrap_or_else(|_| Err(format!("`{tool}` ended without an answer"))),
            _ = ended.changed() => Err(format!("`{tool}` had not answered when the evaluation ended")),
        };
        let settled = match answer {
            Ok(text) => resolve.call::<_, ()>((text,)),
            Err(reason) => tool_error(&context, &tool, &reason).and_then(|error| reject.call::<_, ()>((error,))),
        };
        if settled.is_err() {
            // Most likely the text did not fit in the heap: reject with a short reason.
            context.catch();
            let fallback =
                tool_error(&context, &tool, &format!("`{tool}` answered with more than the sandbox can hold"))
                    .and_then(|error| reject.call::<_, ()>((error,)));
            if fallback.is_err() {
                context.catch();
            }
        }
    });
    Ok(promise)
}

type Sent = (oneshot::Receiver<Result<String, String>>, tokio::sync::watch::Receiver<u64>);

/// Checks the call, marshals its argument and hands it to the host.
fn send<'js>(ctx: &Ctx<'js>, shared: &Arc<Shared>, tool: &str, args: Option<Value<'js>>) -> Result<Sent, String> {
    {
        let state = shared.lock();
        if state.host.is_none() {
            return Err(format!("`{tool}` cannot be called once the evaluation has ended"));
        }
        if !state.callable.iter().any(|name| name == tool) {
            return Err(format!("`{tool}` is not available to scripts here"));
        }
    }
    // The walk may run the script's getters (which may call tools): no lock is held.
    let args = match args {
        None => serde_json::Value::Object(serde_json::Map::new()),
        Some(value) if value.is_undefined() || value.is_null() => serde_json::Value::Object(serde_json::Map::new()),
        Some(value) if value.is_object() && !value.is_array() && !value.is_function() => {
            match Walk::strict(shared, MAX_ARGUMENT_NODES).json(&value) {
                Ok(Some(json)) => json,
                Ok(None) => serde_json::Value::Object(serde_json::Map::new()),
                Err(WalkError::Refused(reason)) => return Err(format!("`{tool}` arguments: {reason}")),
                Err(WalkError::Deadline) => return Err(format!("`{tool}` arguments: the deadline passed")),
                Err(WalkError::Js(_)) => {
                    let thrown = ctx.catch();
                    let mut partial = false;
                    let why = display(shared, &thrown, 500, &mut partial);
                    return Err(format!("`{tool}` arguments could not be read: {why}"));
                }
            }
        }
        Some(_) => return Err(format!("`{tool}` takes one object argument")),
    };
    let ended = shared.end_of_evaluation();
    let mut state = shared.lock();
    if let Some(max) = state.max_calls
        && state.calls >= max
    {
        state.exceeded = true;
        return Err(too_many_calls(max));
    }
    let Some(host) = state.host.clone() else {
        return Err(format!("`{tool}` cannot be called once the evaluation has ended"));
    };
    state.calls += 1;
    drop(state);
    let (reply, receiver) = oneshot::channel();
    host.send(HostCall { tool: tool.to_string(), args, reply })
        .map_err(|_| format!("`{tool}` cannot be called: the host stopped listening"))?;
    Ok((receiver, ended))
}

/// An `Error` whose message is `reason` and whose `tool` is the tool's name. Both are
/// defined, not assigned, so setters on `Error.prototype` never see them.
fn tool_error<'js>(ctx: &Ctx<'js>, tool: &str, reason: &str) -> rquickjs::Result<Value<'js>> {
    let error = Exception::from_message(ctx.clone(), reason)?;
    error.as_object().prop("message", Property::from(reason).writable().configurable())?;
    error.as_object().prop("tool", field(tool))?;
    Ok(error.into_value())
}
