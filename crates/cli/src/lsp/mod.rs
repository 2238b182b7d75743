//! `archmax lsp`: a language server over stdio for workflow workspaces.
//!
//! It publishes the findings `archmax validate` reports, as the editor's unsaved texts
//! stand, and answers hover, completion, go to definition, document symbols and state
//! renames. What those answers are is the language layer's business (`archmax-ide`); this
//! module is the transport and the protocol: framing ([`transport`]), the client's
//! documents and what was published ([`session`]), and the mapping between the protocol's
//! types and the language layer's ([`convert`]). The protocol is served synchronously
//! (`lsp-server`'s message types, our own framing) because the compiler is synchronous and
//! fast: one thread reads frames, the main thread answers in order.
//!
//! The one thing to know: edits are debounced ([`DEBOUNCE`]) and re-check the whole
//! workspace once the client pauses, but any request first brings the analysis up to date,
//! so an answer never reads spans of a text the editor no longer has.

mod convert;
mod session;
mod transport;

use std::io::{self, BufReader};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response, ResponseError};
use lsp_types::{
    CompletionOptions, CompletionParams, CompletionResponse, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, DocumentSymbolParams, DocumentSymbolResponse,
    GotoDefinitionParams, GotoDefinitionResponse, HoverParams, HoverProviderCapability, InitializeParams,
    LogMessageParams, MessageType, OneOf, Position, PrepareRenameResponse, PublishDiagnosticsParams, RenameOptions,
    RenameParams, SaveOptions, ServerCapabilities, ServerInfo, TextDocumentPositionParams, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions, Uri, WorkDoneProgressOptions,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use self::session::Session;
use self::transport::{Incoming, read_frame, write_frame};
use archmax_ide::{self as ide, LineIndex};

/// How long the client must pause typing before a re-check.
pub const DEBOUNCE: Duration = Duration::from_millis(120);

/// Serves the protocol on stdin and stdout until `exit` or the end of input.
pub fn run(root: Option<PathBuf>) -> ExitCode {
    let (sender, receiver) = mpsc::channel::<Incoming>();
    std::thread::spawn(move || {
        let mut stdin = BufReader::new(io::stdin().lock());
        loop {
            match read_frame(&mut stdin) {
                Ok(Some(frame)) => {
                    if sender.send(frame).is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    // The editor's log shows stderr: say why the server stops reading.
                    eprintln!("archmax lsp: stopped reading the client: {error}");
                    break;
                }
            }
        }
    });
    let mut server = Server { root, session: None, shutdown: false, deadline: None, logged: None };
    loop {
        let received = match server.deadline {
            Some(deadline) => receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())),
            None => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let outcome = match received {
            Ok(Incoming::Malformed(answer)) => send(&answer),
            Ok(Incoming::Message(Message::Request(request))) => server.request(request),
            Ok(Incoming::Message(Message::Notification(notification))) => {
                if notification.method == "exit" {
                    return if server.shutdown { ExitCode::SUCCESS } else { ExitCode::FAILURE };
                }
                server.notification(notification)
            }
            Ok(Incoming::Message(Message::Response(_))) => Ok(()),
            Err(RecvTimeoutError::Timeout) => server.flush(),
            Err(RecvTimeoutError::Disconnected) => return ExitCode::FAILURE,
        };
        if outcome.is_err() {
            // Stdout is gone: nobody is left to answer.
            return ExitCode::FAILURE;
        }
    }
}

fn send(frame: &Value) -> io::Result<()> {
    write_frame(&mut io::stdout().lock(), frame)
}

fn send_message(message: Message) -> io::Result<()> {
    let mut frame = serde_json::to_value(&message).map_err(io::Error::other)?;
    if let Some(object) = frame.as_object_mut() {
        object.insert("jsonrpc".to_string(), json!("2.0"));
    }
    send(&frame)
}

fn notify(method: &str, params: impl Serialize) -> io::Result<()> {
    send_message(Message::Notification(Notification::new(method.to_string(), params)))
}

fn failure(code: ErrorCode, message: impl ToString) -> ResponseError {
    ResponseError { code: code as i32, message: message.to_string(), data: None }
}

fn invalid(message: impl ToString) -> ResponseError {
    failure(ErrorCode::InvalidParams, message)
}

fn parse<P: DeserializeOwned>(params: Value) -> Result<P, ResponseError> {
    serde_json::from_value(params).map_err(|error| invalid(format!("invalid params: {error}")))
}

struct Server {
    /// `--root`, which wins over the client's folders.
    root: Option<PathBuf>,
    /// `None` until `initialize`.
    session: Option<Session>,
    shutdown: bool,
    /// When the pending re-check runs.
    deadline: Option<Instant>,
    /// The last workspace problem logged, so it is logged once.
    logged: Option<String>,
}

/// A document position resolved against its text.
struct At {
    path: String,
    text: String,
    offset: usize,
}

impl Server {
    fn request(&mut self, request: Request) -> io::Result<()> {
        let id = request.id.clone();
        let initialized = self.session.is_some();
        let result = match (initialized, request.method.as_str()) {
            (true, "initialize") => Err(failure(ErrorCode::InvalidRequest, "already initialized")),
            (false, "initialize") => self.initialize(request.params),
            (false, _) => Err(failure(ErrorCode::ServerNotInitialized, "the first request must be `initialize`")),
            _ if self.shutdown => Err(failure(ErrorCode::InvalidRequest, "the server is shutting down")),
            (true, "shutdown") => {
                self.shutdown = true;
                Ok(Value::Null)
            }
            (true, method) => {
                self.flush()?;
                self.answer(method, request.params)
            }
        };
        respond(id, result)
    }

    fn initialize(&mut self, params: Value) -> Result<Value, ResponseError> {
        let params: InitializeParams = parse(params)?;
        #[allow(deprecated)]
        let client_root = params
            .workspace_folders
            .as_ref()
            .and_then(|folders| folders.first())
            .map(|folder| folder.uri.clone())
            .or(params.root_uri.clone())
            .and_then(|uri| session::file_path(&uri).ok());
        self.session = Some(Session::new(self.root.clone().or(client_root)));
        let sync = TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::INCREMENTAL),
            save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions { include_text: Some(false) })),
            ..TextDocumentSyncOptions::default()
        };
        let capabilities = ServerCapabilities {
            text_document_sync: Some(TextDocumentSyncCapability::Options(sync)),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            completion_provider: Some(CompletionOptions {
                trigger_characters: Some(vec![":".into(), " ".into(), "{".into(), "-".into()]),
                ..CompletionOptions::default()
            }),
            definition_provider: Some(OneOf::Left(true)),
            document_symbol_provider: Some(OneOf::Left(true)),
            rename_provider: Some(OneOf::Right(RenameOptions {
                prepare_provider: Some(true),
                work_done_progress_options: WorkDoneProgressOptions::default(),
            })),
            ..ServerCapabilities::default()
        };
        let info = ServerInfo { name: "archmax".into(), version: Some(env!("CARGO_PKG_VERSION").into()) };
        Ok(json!({ "capabilities": capabilities, "serverInfo": info }))
    }

    fn session(&mut self) -> Result<&mut Session, ResponseError> {
        self.session.as_mut().ok_or_else(|| failure(ErrorCode::ServerNotInitialized, "not initialized"))
    }

    fn at(&mut self, uri: &Uri, position: Position) -> Result<At, ResponseError> {
        let session = self.session()?;
        let path = session.relative(uri).map_err(invalid)?;
        let text = session.text(&path).map_err(invalid)?.to_string();
        let offset = LineIndex::new(&text).offset(convert::ide_position(position)).map_err(invalid)?;
        Ok(At { path, text, offset })
    }

    fn at_position(&mut self, params: &TextDocumentPositionParams) -> Result<At, ResponseError> {
        self.at(&params.text_document.uri, params.position)
    }

    fn answer(&mut self, method: &str, params: Value) -> Result<Value, ResponseError> {
        let value = match method {
            "textDocument/hover" => {
                let params: HoverParams = parse(params)?;
                let at = self.at_position(&params.text_document_position_params)?;
                let session = self.session()?;
                to_value(ide::hover(session.workspace(), &at.path, &at.text, at.offset).map(convert::hover))
            }
            "textDocument/completion" => {
                let params: CompletionParams = parse(params)?;
                let at = self.at_position(&params.text_document_position)?;
                let items = ide::complete(self.session()?.workspace(), &at.path, &at.text, at.offset);
                to_value(CompletionResponse::List(convert::completions(items)))
            }
            "textDocument/definition" => {
                let params: GotoDefinitionParams = parse(params)?;
                let at = self.at_position(&params.text_document_position_params)?;
                let session = self.session()?;
                let found = ide::locate::definition(session.workspace(), &at.path, &at.text, at.offset)
                    .and_then(|location| convert::location(session, location));
                to_value(found.map(GotoDefinitionResponse::Scalar))
            }
            "textDocument/documentSymbol" => {
                let params: DocumentSymbolParams = parse(params)?;
                let at = self.at(&params.text_document.uri, Position::new(0, 0))?;
                let symbols = ide::locate::symbols(self.session()?.workspace(), &at.path, &at.text);
                to_value(DocumentSymbolResponse::Nested(symbols.into_iter().map(convert::symbol).collect()))
            }
            "textDocument/prepareRename" => {
                let params: TextDocumentPositionParams = parse(params)?;
                let at = self.at_position(&params)?;
                let found = ide::locate::state_at(self.session()?.workspace(), &at.path, &at.text, at.offset);
                to_value(found.map(|(_, range)| PrepareRenameResponse::Range(convert::range(range))))
            }
            "textDocument/rename" => {
                let params: RenameParams = parse(params)?;
                let at = self.at_position(&params.text_document_position)?;
                let session = self.session()?;
                let files = ide::locate::rename(session.workspace(), &at.path, &at.text, at.offset, &params.new_name)
                    .and_then(|files| convert::rename(session, files))
                    .map_err(invalid)?;
                to_value(files)
            }
            other => return Err(failure(ErrorCode::MethodNotFound, format!("unknown method `{other}`"))),
        };
        value.map_err(|error| failure(ErrorCode::InternalError, error))
    }

    fn notification(&mut self, notification: Notification) -> io::Result<()> {
        let Some(session) = self.session.as_mut() else {
            return Ok(());
        };
        let problem = match notification.method.as_str() {
            "textDocument/didOpen" => match parse::<DidOpenTextDocumentParams>(notification.params) {
                Ok(params) => {
                    let document = params.text_document;
                    match session.open(document.uri, document.version, document.text) {
                        Ok(path) => return self.publish_opened(&path),
                        Err(outside) => Some(outside.to_string()),
                    }
                }
                Err(error) => Some(error.message),
            },
            "textDocument/didChange" => match parse::<DidChangeTextDocumentParams>(notification.params) {
                Ok(params) => match session.relative(&params.text_document.uri) {
                    Ok(path) => {
                        session.set_version(&path, params.text_document.version);
                        if let Some(text) = session.text_mut(&path) {
                            for change in params.content_changes {
                                apply(text, change.range, &change.text);
                            }
                        }
                        self.deadline = Some(Instant::now() + DEBOUNCE);
                        None
                    }
                    Err(outside) => Some(outside.to_string()),
                },
                Err(error) => Some(error.message),
            },
            "textDocument/didSave" | "textDocument/didClose" => {
                let uri = if notification.method == "textDocument/didSave" {
                    parse::<DidSaveTextDocumentParams>(notification.params).map(|params| params.text_document.uri)
                } else {
                    parse::<DidCloseTextDocumentParams>(notification.params).map(|params| params.text_document.uri)
                };
                match uri.map(|uri| session.relative(&uri).map_err(invalid)) {
                    Ok(Ok(path)) => {
                        if notification.method == "textDocument/didClose" {
                            session.close(&path);
                        }
                        session.touch();
                        self.deadline = Some(Instant::now() + DEBOUNCE);
                        None
                    }
                    Ok(Err(error)) | Err(error) => Some(error.message),
                }
            }
            _ => None,
        };
        match problem {
            Some(problem) => log(MessageType::WARNING, &problem),
            None => Ok(()),
        }
    }

    /// Re-checks now and publishes what changed, then the opened file's findings.
    fn publish_opened(&mut self, path: &str) -> io::Result<()> {
        let published = self.check()?;
        if !published.iter().any(|params| {
            self.session.as_ref().and_then(|session| session.uri_of(path)).is_some_and(|uri| uri == params.uri)
        }) && let Some(params) = self.session.as_ref().and_then(|session| session.published(path))
        {
            notify("textDocument/publishDiagnostics", params)?;
        }
        Ok(())
    }

    /// Runs a pending re-check.
    fn flush(&mut self) -> io::Result<()> {
        self.check().map(|_| ())
    }

    fn check(&mut self) -> io::Result<Vec<PublishDiagnosticsParams>> {
        self.deadline = None;
        let Some(session) = self.session.as_mut() else {
            return Ok(Vec::new());
        };
        let published = session.check();
        for params in &published {
            notify("textDocument/publishDiagnostics", params)?;
        }
        if session.problem() != self.logged.as_ref() {
            self.logged = session.problem().cloned();
            if let Some(problem) = &self.logged {
                log(MessageType::ERROR, problem)?;
            }
        }
        Ok(published)
    }
}

fn to_value(value: impl Serialize) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|error| error.to_string())
}

fn respond(id: RequestId, result: Result<Value, ResponseError>) -> io::Result<()> {
    let response = match result {
        Ok(value) => Response { id, result: Some(value), error: None },
        Err(error) => Response { id, result: None, error: Some(error) },
    };
    send_message(Message::Response(response))
}

fn log(kind: MessageType, message: &str) -> io::Result<()> {
    notify("window/logMessage", LogMessageParams { typ: kind, message: message.to_string() })
}

/// Applies one content change; a range past the end clamps to the end.
fn apply(text: &mut String, range: Option<lsp_types::Range>, new_text: &str) {
    let Some(range) = range else {
        *text = new_text.to_string();
        return;
    };
    let index = LineIndex::new(text);
    let start = index.offset(convert::ide_position(range.start)).unwrap_or(text.len());
    let end = index.offset(convert::ide_position(range.end)).unwrap_or(text.len()).max(start);
    text.replace_range(start..end, new_text);
}
