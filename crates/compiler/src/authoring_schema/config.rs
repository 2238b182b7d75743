//! The schema of `archmax.toml`, the host's tables (read as TOML; the schema describes
//! the table it parses to).

use archmax_config::settings::notify::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_NOTIFY_TIMEOUT_MS, MAX_ATTEMPTS_RANGE, NOTIFY_TIMEOUT_RANGE_MS, NotifyEvent,
    NotifyPreset,
};
use archmax_config::settings::{
    ContextSettings, DEFAULT_SIGNATURE_HEADER, DEFAULT_STARTUP_TIMEOUT_MS, DEFAULT_TOLERANCE_SECONDS,
    DEFAULT_TOOL_TIMEOUT_MS,
};
use serde_json::{Value, json};

use super::{closed, defaults_to, document, flag, list, nonempty, one_of};

const PATH_ACCESS: [&str; 6] = ["read", "list", "search", "write", "remove", "execute"];
const ENV_NAME: &str = "^[A-Za-z_][A-Za-z0-9_]*$";
const TIMEOUT_MS: (u64, u64) = (1, 600_000);
// The ranges `[limits]` accepts, as the configuration reader's `limits` module checks
// them: tokens and model calls per turn, US dollars per session.
const LIMIT_TOKENS: (u64, u64) = (1_000, 1_000_000_000);
const LIMIT_CALLS: (u64, u64) = (1, 100_000);
const LIMIT_COST: u64 = 1_000_000;
/// A workflow's slug, as the key of its `[limits.workflows.<slug>]` table.
const SLUG: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

fn timeout(description: &str) -> Value {
    json!({ "type": "integer", "minimum": TIMEOUT_MS.0, "maximum": TIMEOUT_MS.1, "description": description })
}

pub fn schema() -> Value {
    let context = ContextSettings::default();
    document(
        "config.schema.json",
        "archmax.toml",
        "The host's tables: mounts, webhook connections, schedules, MCP servers, essential tools, context budgets, spending limits, model providers, notifications and the runner's public address.",
        closed(
            "The whole file.",
            &[
                (
                    "essential_tools",
                    list("Host tools on in every state.", nonempty("A host tool, `<collection>__<tool>`.")),
                ),
                (
                    "mounts",
                    json!({
                        "type": "object",
                        "description": "Host folders the sessions see, keyed by their workspace path (`reference/`).",
                        "additionalProperties": closed(
                            "One mount.",
                            &[
                                ("source", nonempty("The folder under the workspace root it serves (default: the key).")),
                                ("read_only", defaults_to(flag("Sessions may not write there."), json!(true))),
                                ("governed", defaults_to(flag("Reachable only where a state's `mounts` grants it."), json!(false))),
                                ("searchable", defaults_to(flag("`glob` and `grep` reach into it."), json!(true))),
                            ],
                            &[],
                        ),
                    }),
                ),
                (
                    "connections",
                    json!({
                        "type": "object",
                        "description": "Webhook senders, keyed by slug, whose firings are signed.",
                        "additionalProperties": closed(
                            "One connection.",
                            &[
                                ("secret_env", json!({ "type": "string", "pattern": ENV_NAME, "description": "The variable holding the HMAC-SHA256 secret." })),
                                ("signature_header", defaults_to(nonempty("The header carrying the signature."), json!(DEFAULT_SIGNATURE_HEADER))),
                                ("timestamp_header", nonempty("The header carrying the signed timestamp, when the signature covers one.")),
                                ("tolerance_seconds", json!({ "type": "integer", "minimum": 1, "maximum": 86_400, "default": DEFAULT_TOLERANCE_SECONDS, "description": "How old a signed timestamp may be, in seconds." })),
                            ],
                            &["secret_env"],
                        ),
                    }),
                ),
                (
                    "schedule",
                    json!({
                        "type": "object",
                        "description": "Wake triggers the runner delivers at a parked session's resume time, keyed by workflow.",
                        "additionalProperties": closed(
                            "One workflow's schedule.",
                            &[("wake_trigger", nonempty("The trigger delivered when the resume time comes."))],
                            &["wake_trigger"],
                        ),
                    }),
                ),
                (
                    "mcp_servers",
                    json!({
                        "type": "object",
                        "description": "MCP servers that provide host tools, keyed by name; their tools are `<collection>__<tool>`.",
                        "additionalProperties": server(),
                    }),
                ),
                (
                    "context",
                    closed(
                        "The sessions' context budgets.",
                        &[
                            (
                                "window_tokens",
                                json!({ "type": "integer", "minimum": 1000, "maximum": 100_000_000, "description": "The model's context window in tokens (default: the runtime's table of models)." }),
                            ),
                            (
                                "compact_at",
                                json!({ "type": "number", "minimum": 0.1, "maximum": 0.95, "default": context.compact_at, "description": "The share of the window past which older conversation is summarised." }),
                            ),
                            (
                                "max_tool_result_tokens",
                                json!({ "type": "integer", "minimum": 100, "maximum": 10_000_000, "default": context.max_tool_result_tokens, "description": "A longer tool result goes to large_tool_results/ and the model gets a preview." }),
                            ),
                            (
                                "keep_recent",
                                json!({ "type": "integer", "minimum": 0, "maximum": 10_000, "default": context.keep_recent, "description": "Messages at the end of the conversation always kept verbatim." }),
                            ),
                        ],
                        &[],
                    ),
                ),
                ("limits", limits()),
                ("inbox", inbox()),
                (
                    "providers",
                    json!({
                        "type": "object",
                        "description": "Model endpoints, keyed by name; `[models]` routes model ids to them.",
                        "additionalProperties": provider(),
                    }),
                ),
                ("serve", serve()),
                (
                    "notify",
                    json!({
                        "type": "object",
                        "description": "Outgoing webhooks `archmax serve` calls when a session parks or fails, or a decision waits longer than `waiting_after`, keyed by a slug that metrics and logs name.",
                        "propertyNames": { "pattern": SLUG },
                        "additionalProperties": notifier(),
                    }),
                ),
                (
                    "models",
                    json!({
                        "type": "object",
                        "description": "Model ids as workflows name them, routed to a provider and priced; a key with `*` is a pattern routing every id it matches (an exact key wins, then the most specific pattern). An id no entry routes goes to the endpoint of the ARCHMAX_API_* variables.",
                        "additionalProperties": model_entry(),
                    }),
                ),
            ],
            &[],
        ),
    )
}

/// `[serve]`: the runner's own settings.
fn serve() -> Value {
    closed(
        "How `archmax serve` is reached.",
        &[(
            "public_url",
            json!({ "type": "string", "pattern": "^https?://[^/?#@]+[^?#]*$", "description": "The address people open this runner's inbox at (http or https, no query); notifications link to `<public_url>/sessions/<id>`. Without it they carry no link." }),
        )],
        &[],
    )
}

/// One `[notify.<name>]`.
fn notifier() -> Value {
    let events: Vec<&str> = NotifyEvent::ALL.iter().map(|event| event.as_str()).collect();
    let variable = |description: &str| json!({ "type": "string", "pattern": ENV_NAME, "description": description });
    closed(
        "One outgoing webhook: an HMAC-signed POST (`X-Archmax-Signature: sha256=<hex>` over `<X-Archmax-Timestamp>.<body>`, as incoming webhooks are signed), retried with backoff, never holding up a turn. Exactly one of `url` and `url_env`; `secret_env` unless `preset` is `slack`.",
        &[
            (
                "url",
                json!({ "type": "string", "pattern": "^https?://[^/?#@]+", "description": "The http(s) address to call, without credentials." }),
            ),
            (
                "url_env",
                variable(
                    "The variable holding the address, for one that carries a token (a Slack incoming webhook's does).",
                ),
            ),
            ("secret_env", variable("The variable holding the HMAC-SHA256 key the requests are signed with.")),
            (
                "on",
                json!({ "type": "array", "minItems": 1, "uniqueItems": true, "items": { "enum": events }, "default": ["parked", "failed"], "description": "What it is called for: a session parked, a session failed, a decision pending longer than `waiting_after` (once per park)." }),
            ),
            (
                "waiting_after",
                json!({ "type": "string", "pattern": "^[0-9]+[smhd]$", "default": "30m", "description": "How long a decision waits before the `waiting` notification, from 1s to 7d; needs \"waiting\" in `on`." }),
            ),
            (
                "workflows",
                json!({ "type": "array", "minItems": 1, "items": { "type": "string", "pattern": SLUG }, "description": "Only these workflows' sessions (default: every workflow)." }),
            ),
            (
                "preset",
                defaults_to(
                    one_of(
                        "The body: archmax's JSON, or what a Slack incoming webhook takes (`text` and `blocks`).",
                        &NotifyPreset::NAMES,
                    ),
                    json!("archmax"),
                ),
            ),
            (
                "timeout_ms",
                json!({ "type": "integer", "minimum": NOTIFY_TIMEOUT_RANGE_MS.0, "maximum": NOTIFY_TIMEOUT_RANGE_MS.1, "default": DEFAULT_NOTIFY_TIMEOUT_MS, "description": "The bound on each attempt, in milliseconds." }),
            ),
            (
                "max_attempts",
                json!({ "type": "integer", "minimum": MAX_ATTEMPTS_RANGE.0, "maximum": MAX_ATTEMPTS_RANGE.1, "default": DEFAULT_MAX_ATTEMPTS, "description": "Attempts in all: a network error, a timeout, 429 or 5xx is tried again after an exponential backoff with jitter (or the receiver's `Retry-After`)." }),
            ),
        ],
        &[],
    )
}

/// The fields of an object input's shape: an `object` field nests its own `fields`,
/// declared the same way (the reader holds them, at most four objects deep; the schema
/// spells out the first level only).
fn inbox_fields() -> Value {
    let mut types: Vec<&str> = vec!["string", "integer", "number", "boolean", "date", "date-time", "array"];
    let mut keys = vec![
        (
            "name",
            json!({ "type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_-]*$", "maxLength": 64, "description": "The field's key in the object; its control is named by the dotted path." }),
        ),
        (
            "label",
            json!({ "type": "string", "minLength": 1, "maxLength": 120, "description": "What the form's label says (default: the name)." }),
        ),
        (
            "required",
            json!({ "type": "boolean", "default": false, "description": "Whether the object must have the field." }),
        ),
        (
            "enum",
            json!({ "type": "array", "items": { "type": "string" }, "minItems": 1, "uniqueItems": true, "description": "For a `string` field: its choices, offered as a list." }),
        ),
        (
            "items",
            json!({ "enum": ["string", "integer", "number", "boolean", "date", "date-time"], "default": "string", "description": "For an `array` field: the type of its items, one per line." }),
        ),
    ];
    types.push("object");
    keys.push((
        "fields",
        json!({
            "type": "array",
            "minItems": 1,
            "maxItems": 32,
            "items": { "type": "object" },
            "description": "For an `object` field: its own fields, declared as these are (objects nest at most four deep).",
        }),
    ));
    keys.insert(1, ("type", json!({ "enum": types, "description": "A signature type but `file`." })));
    json!({
        "type": "array",
        "minItems": 1,
        "maxItems": 32,
        "description": "The object's fields, in the form's order.",
        "items": closed("One field.", &keys, &["name", "type"]),
    })
}

/// `[limits]`: the default limits, and `workflows`, each workflow's own over them. A
/// workflow's table takes the same keys, where `0` lifts a limit instead of being refused.
/// `[inbox]`: how the decision inbox shows each workflow's sessions.
fn inbox() -> Value {
    let names = |description: &str| {
        json!({
            "type": "array",
            "maxItems": 8,
            "uniqueItems": true,
            "items": { "type": "string", "pattern": "^[a-z][a-z0-9_-]*$" },
            "description": description,
        })
    };
    let workflow = closed(
        "How the inbox shows this workflow's sessions.",
        &[
            ("summary", names("The variables a row of the inbox shows (default: the session's first locked inputs).")),
            ("comment_required", names("States a decision leads to that need the decider's comment.")),
            (
                "fields",
                json!({
                    "type": "object",
                    "description": "The shapes of the workflow's `object` inputs, by input name: each generates a fieldset in the inbox's forms instead of a JSON box.",
                    "additionalProperties": closed(
                        "One object input's shape.",
                        &[("fields", inbox_fields())],
                        &["fields"],
                    ),
                }),
            ),
        ],
        &[],
    );
    closed(
        "How the decision inbox presents sessions, and how people sign in to it.",
        &[
            (
                "workflows",
                json!({ "type": "object", "description": "Per workflow, by slug.", "additionalProperties": workflow }),
            ),
            ("oidc", oidc()),
        ],
        &[],
    )
}

/// `[inbox.oidc]`: sign-in through an OpenID Connect provider.
fn oidc() -> Value {
    let url = |description: &str| json!({ "type": "string", "pattern": "^https?://[^/?#@]+[^?#]*$", "description": description });
    let strings = |description: &str| json!({ "type": "array", "maxItems": 64, "uniqueItems": true, "items": { "type": "string", "minLength": 1 }, "description": description });
    let text =
        |description: &str| json!({ "type": "string", "minLength": 1, "maxLength": 256, "description": description });
    closed(
        "Sign-in to the inbox through an OpenID Connect provider, beside the runner's tokens (code flow with PKCE). At least one of `allowed_domains` and `allowed_groups` is required.",
        &[
            (
                "issuer",
                url(
                    "The provider's issuer URL (its `iss`); discovery is read from `<issuer>/.well-known/openid-configuration`. https, or http on a loopback address only.",
                ),
            ),
            ("client_id", text("The client id the provider registered for this inbox.")),
            (
                "client_secret_env",
                json!({ "type": "string", "pattern": ENV_NAME, "description": "The environment variable holding the client secret; the runner refuses to start when it is unset or empty." }),
            ),
            (
                "allowed_domains",
                strings("Email domains let in (exact, case-insensitive; a subdomain is another domain)."),
            ),
            ("allowed_groups", strings("Groups let in, as the groups claim names them.")),
            ("groups_claim", defaults_to(text("The claim that lists a person's groups."), json!("groups"))),
            (
                "identity_claim",
                defaults_to(
                    text(
                        "The claim whose value becomes the identity matched against `approvers`; `email` must be ASCII and is lowercased, and is trusted only when `email_verified` is true.",
                    ),
                    json!("email"),
                ),
            ),
            ("scopes", defaults_to(strings("Scopes requested besides `openid`."), json!(["email"]))),
            (
                "grant_scopes",
                defaults_to(
                    json!({ "type": "array", "minItems": 1, "uniqueItems": true, "items": { "enum": ["read", "decide", "start"] }, "description": "The runner scopes a person signed in this way holds (never `admin`)." }),
                    json!(["read", "decide"]),
                ),
            ),
            ("provider_name", text("What the sign-in button calls the provider (default: the issuer's host).")),
            (
                "redirect_url",
                url("Where the provider sends people back (default: `<[serve] public_url>/inbox/oidc/callback`)."),
            ),
            (
                "trust_unverified_email",
                defaults_to(
                    json!({ "type": "boolean", "description": "Trust an email claim that comes without `email_verified` (only for a provider, such as Microsoft Entra ID, that never sends it and whose users cannot set their email)." }),
                    json!(false),
                ),
            ),
        ],
        &["issuer", "client_id", "client_secret_env"],
    )
}

fn limits() -> Value {
    let tokens = json!({ "type": "integer", "minimum": LIMIT_TOKENS.0, "maximum": LIMIT_TOKENS.1 });
    let calls = |minimum: u64| json!({ "type": "integer", "minimum": minimum, "maximum": LIMIT_CALLS.1 });
    let described = |mut schema: Value, description: &str| {
        schema["description"] = json!(description);
        schema
    };
    let workflow = closed(
        "One workflow's limits; a key it leaves out keeps the value of `[limits]`.",
        &[
            (
                "max_tokens_per_turn",
                json!({
                    "anyOf": [{ "const": 0 }, tokens.clone()],
                    "description": "This workflow's tokens per turn, from 1000 to 1000000000, or 0 for no limit.",
                }),
            ),
            (
                "max_model_calls_per_turn",
                described(calls(0), "This workflow's model calls per turn, or 0 for no limit."),
            ),
            (
                "max_cost_per_session",
                json!({ "type": "number", "minimum": 0, "maximum": LIMIT_COST, "description": "This workflow's US dollars per session, or 0 for no limit." }),
            ),
        ],
        &[],
    );
    closed(
        "Spending limits. A model call that would pass one is not made: the session waits, `awaiting_input`, until a person raises its budget (`--raise-budget`). A key left out sets no limit.",
        &[
            (
                "max_tokens_per_turn",
                described(
                    tokens,
                    "The most input and output tokens one turn's model calls may use; a sub-workflow's tokens count in its caller's turn once it returns.",
                ),
            ),
            (
                "max_model_calls_per_turn",
                described(
                    calls(LIMIT_CALLS.0),
                    "The most model calls one turn may make: agent, grader, summarizer and park-message calls alike.",
                ),
            ),
            (
                "max_cost_per_session",
                json!({ "type": "number", "exclusiveMinimum": 0, "maximum": LIMIT_COST, "description": "The most a session may spend on priced model calls in its whole life, in US dollars; each raise allows as much again. Calls to an unpriced model are not counted." }),
            ),
            (
                "workflows",
                json!({
                    "type": "object",
                    "description": "Limits for one workflow, keyed by its slug, each key replacing the same key of `[limits]`.",
                    "propertyNames": { "pattern": SLUG },
                    "additionalProperties": workflow,
                }),
            ),
        ],
        &[],
    )
}

/// One `[models."<id>"]`: a route (`provider`, `name`), a price, or both.
fn model_entry() -> Value {
    let rate =
        |description: &str| json!({ "type": "number", "minimum": 0, "maximum": 100_000, "description": description });
    closed(
        "One model id's route (`provider`, `name`), its price, or both; a table with neither is refused.",
        &[
            ("provider", nonempty("The `[providers.<name>]` that serves it.")),
            (
                "name",
                nonempty(
                    "The provider's own name for the model (default: the id); for Azure, looked up in `deployments`.",
                ),
            ),
            (
                "price",
                closed(
                    "What the model costs, in USD per million tokens; it wins over ARCHMAX_PRICE_* and the built-in list prices. Without a price from any of them, usage is reported unpriced, never as free.",
                    &[
                        ("input", rate("Per million input tokens.")),
                        ("output", rate("Per million output tokens.")),
                        (
                            "cache_read",
                            rate("Per million tokens read from the prompt cache (default: the input rate)."),
                        ),
                        (
                            "cache_write",
                            rate("Per million tokens written to the prompt cache (default: the input rate)."),
                        ),
                    ],
                    &["input", "output"],
                ),
            ),
            (
                "fallbacks",
                json!({
                    "type": "array",
                    "maxItems": 8,
                    "uniqueItems": true,
                    "items": { "type": "string", "minLength": 1 },
                    "description": "Model ids tried in order when a call to this one is rate limited, overloaded, fails with a server error or cannot reach its provider, after the provider's retries and before any of the answer is shown. Each goes through its own route (or the default endpoint); their own fallbacks are not followed. Needs `provider`.",
                }),
            ),
        ],
        &[],
    )
}

fn provider() -> Value {
    let string_table = |description: &str| json!({ "type": "object", "description": description, "additionalProperties": { "type": "string", "minLength": 1 } });
    closed(
        "One model provider.",
        &[
            ("kind", one_of("The protocol it speaks.", &["openai", "anthropic", "azure-openai"])),
            (
                "base_url",
                json!({ "type": "string", "pattern": "^https?://", "description": "The API root (required but for `anthropic`, which defaults to https://api.anthropic.com)." }),
            ),
            (
                "api_key_env",
                json!({ "type": "string", "pattern": ENV_NAME, "description": "The variable holding the key (required but for `openai`)." }),
            ),
            ("headers", string_table("Extra headers sent with every request.")),
            (
                "timeout_ms",
                timeout("The bound on each attempt, in milliseconds (default: ARCHMAX_REQUEST_TIMEOUT_MS)."),
            ),
            ("api_version", nonempty("Azure OpenAI's `api-version` (required for `azure-openai`).")),
            (
                "max_concurrency",
                json!({ "type": "integer", "minimum": 1, "maximum": 1024, "description": "The most calls this runner sends the provider at once; more wait their turn (default: no bound)." }),
            ),
            ("deployments", string_table("Azure OpenAI: model name → the deployment serving it (default: the name).")),
        ],
        &["kind"],
    )
}

fn server() -> Value {
    let mut server = closed(
        "One MCP server: a child process over stdio (`command`) or streamable HTTP (`url`).",
        &[
            ("command", nonempty("The program to start (first beside the archmax binary, then on PATH).")),
            ("args", list("Its arguments.", json!({ "type": "string" }))),
            (
                "env",
                json!({ "type": "object", "description": "Fixed variables, over a minimal base environment.", "additionalProperties": { "type": "string" } }),
            ),
            (
                "env_vars",
                list(
                    "Variables copied by name from the runner's environment.",
                    json!({ "type": "string", "pattern": ENV_NAME }),
                ),
            ),
            ("cwd", nonempty("Its working directory, relative to the workspace root.")),
            (
                "url",
                json!({ "type": "string", "pattern": "^https?://", "description": "The server's streamable HTTP endpoint." }),
            ),
            (
                "bearer_token_env_var",
                json!({ "type": "string", "pattern": ENV_NAME, "description": "The variable holding the bearer token sent with each request." }),
            ),
            ("collection", nonempty("The tools' prefix (default: the table's name).")),
            (
                "startup_timeout_ms",
                defaults_to(
                    timeout("How long it may take to start, in milliseconds."),
                    json!(DEFAULT_STARTUP_TIMEOUT_MS),
                ),
            ),
            (
                "tool_timeout_ms",
                defaults_to(timeout("How long one call may take, in milliseconds."), json!(DEFAULT_TOOL_TIMEOUT_MS)),
            ),
            (
                "path_arguments",
                json!({
                    "type": "object",
                    "description": "For each tool, the arguments naming workspace paths and their access.",
                    "additionalProperties": { "type": "object", "additionalProperties": one_of("The access the argument asks for.", &PATH_ACCESS) },
                }),
            ),
        ],
        &[],
    );
    server["oneOf"] = json!([{ "required": ["command"] }, { "required": ["url"] }]);
    server
}
