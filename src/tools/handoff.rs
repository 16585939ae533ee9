//! `hand_off_to_person` (contract 19): validated like `issue_refund`;
//! moves no money and leaves the refund latch as it was. At most one per
//! conversation.

use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::WriteKind;
use crate::handoff::Handoff;
use crate::handoff::tool::{self, TOOL_NAME};

pub(super) const DECLARED: Declared = Declared {
    name: TOOL_NAME,
    description: tool::TOOL_DESCRIPTION,
    parameters: tool::declared_parameters,
};
pub(super) const STEP: Step = Step::Handoff;
pub(super) const KIND: Option<WriteKind> = None;

/// Everyone's, visitors' too.
pub(super) fn offered<G, O>(_: &Session<'_, G, O>) -> bool {
    true
}

pub(super) async fn carry_out<G, O>(session: &mut Session<'_, G, O>, arguments: &str) -> String {
    let arguments = match tool::parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            return session
                .rejected(TOOL_NAME, error.schema_paths(), error.to_string())
                .to_json();
        }
    };
    // The summary paraphrases the customer: only its length is logged.
    tracing::info!(
        event = "tool_call",
        tool = TOOL_NAME,
        validation = "ok",
        handoff_reason = arguments.reason.as_str(),
        summary_chars = arguments.summary.chars().count(),
        refused_second_handoff = session.handoff.is_some(),
    );
    match (&session.handoff, &session.handoff_id) {
        (Some(_), _) | (None, None) => tool::already_handed_off(),
        (None, Some(id)) => {
            let result = tool::handed_off(id);
            session.stats.handoff = Some(arguments.reason);
            session.handoff = Some(Handoff {
                id: id.clone(),
                reason: arguments.reason,
                summary: Some(arguments.summary),
            });
            result
        }
    }
}
