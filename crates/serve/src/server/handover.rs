//! An upload's files handed to a start or a delivery: checked against the trigger before
//! the turn is admitted, their inputs seeded with the session paths, and handed to the
//! runtime with the request, which copies them only once it holds the session and has
//! accepted the request ([`archmax_vm::handover`]).

use serde_json::{Map, Value};

use archmax_vm::TurnRequest;
use archmax_vm::handover::{HandedFile, Handover, Sender};
use archmax_vm::runtime::Runtime;

use crate::error::ApiError;

/// Hands `files` to the start `request` of session `session`: a start that would be
/// refused anyway is refused here, before the turn is queued.
pub(super) async fn to_start(
    runtime: &Runtime,
    request: &mut TurnRequest,
    session: &str,
    files: Vec<HandedFile>,
) -> Result<(), ApiError> {
    if files.is_empty() {
        return Ok(());
    }
    let trigger = request.trigger.clone().unwrap_or_else(|| "manual".to_string());
    let handed = runtime.prepare_handover((&request.workflow, &trigger), files, &request.variables, Sender::Upload)?;
    runtime.check_handed_start(request, session, &handed, Sender::Upload).await?;
    handed.seed(&mut request.variables);
    request.handed = handed;
    Ok(())
}

/// Hands `files` to a delivery of `trigger` to a session of `workflow`, seeding their
/// inputs in `variables`.
pub(super) fn to_delivery(
    runtime: &Runtime,
    (workflow, trigger): (&str, &str),
    files: Vec<HandedFile>,
    variables: &mut Map<String, Value>,
) -> Result<Handover, ApiError> {
    let handed = runtime.prepare_handover((workflow, trigger), files, variables, Sender::Upload)?;
    handed.seed(variables);
    Ok(handed)
}
