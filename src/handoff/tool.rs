//! The `hand_off_to_person` tool: its declaration, the checks its arguments
//! pass, and its result. Validated like `issue_refund`: the contract's
//! schema, verbatim, compiled once; what is declared to the model is derived
//! from it for strict mode (`minLength`, `maxLength` move into the
//! description). It moves no money and spends no refund latch.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::Reason;
use crate::refund::tool::{SchemaFailure, ToolSchema};

pub const TOOL_NAME: &str = "hand_off_to_person";

pub const TOOL_DESCRIPTION: &str = "Hand this conversation to a person from the support team. Use it when the \
     customer asks to talk to a person, or when the request is outside what you can do (anything but refunds of \
     the customer's own orders: changing an address, a delivery, an account, a complaint about a person). Do not \
     use it for a refund you can make or that is waiting for approval. reason: customer_asked, cannot_help or \
     other; summary: what the customer needs and what was already done, for the person, in one or two sentences. \
     Moves no money. After it, tell the customer that a person will take over.";

/// The contract's schema, verbatim (section 12).
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"reason":{"type":"string","enum":["customer_asked","cannot_help","other"]},"summary":{"type":"string","minLength":1,"maxLength":1000}},"required":["reason","summary"],"additionalProperties":false}"#;

static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| ToolSchema::compile(PARAMETERS_JSON));

pub fn parameters_schema() -> &'static Value {
    SCHEMA.parameters()
}

/// The schema declared to the model with `strict: true`.
pub fn declared_parameters() -> &'static Value {
    SCHEMA.declared()
}

/// Compiles the validator before the first request needs it.
pub fn warm_up() {
    LazyLock::force(&SCHEMA);
}

/// Arguments that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffArguments {
    pub reason: Reason,
    /// The model's words: never logged (it paraphrases the customer).
    pub summary: String,
}

/// Why a `hand_off_to_person` call's arguments were not run.
pub type HandoffArgumentError = SchemaFailure;

pub fn parse_arguments(raw: &str) -> Result<HandoffArguments, HandoffArgumentError> {
    let value = SCHEMA.parse(TOOL_NAME, raw)?;
    let invalid = |field: &str| SchemaFailure::invalid_field(TOOL_NAME, field);
    let reason = value["reason"]
        .as_str()
        .and_then(Reason::parse)
        .filter(|reason| matches!(reason, Reason::CustomerAsked | Reason::CannotHelp | Reason::Other))
        .ok_or_else(|| invalid("reason"))?;
    let summary = value["summary"].as_str().ok_or_else(|| invalid("summary"))?;
    Ok(HandoffArguments {
        reason,
        summary: summary.to_owned(),
    })
}

/// What the model is told of a handoff it asked for.
pub fn handed_off(handoff_id: &str) -> String {
    json!({"status": "handed_off", "handoff_id": handoff_id}).to_string()
}

/// What the model is told of a second handoff in one conversation.
pub fn already_handed_off() -> String {
    json!({"error": "this conversation is already with a person from the support team; do not call hand_off_to_person again"})
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_arguments_pass_and_name_their_reason() {
        let parsed = parse_arguments(r#"{"reason":"cannot_help","summary":"wants a new address"}"#).unwrap();
        assert_eq!(parsed.reason, Reason::CannotHelp);
        assert_eq!(parsed.summary, "wants a new address");
    }

    #[test]
    fn the_contracts_schema_is_enforced() {
        for bad in [
            r#"{"reason":"risk","summary":"x"}"#,
            r#"{"reason":"other","summary":""}"#,
            r#"{"reason":"other"}"#,
            r#"{"reason":"other","summary":"x","extra":1}"#,
            "not json",
        ] {
            assert!(parse_arguments(bad).is_err(), "{bad}");
        }
        let long = json!({"reason": "other", "summary": "x".repeat(1001)}).to_string();
        assert!(parse_arguments(&long).is_err());
    }

    #[test]
    fn the_declared_schema_is_strict_compatible_and_keeps_the_limits_in_words() {
        let declared = declared_parameters();
        let summary = &declared["properties"]["summary"];
        assert!(summary.get("minLength").is_none() && summary.get("maxLength").is_none());
        let words = summary["description"].as_str().unwrap();
        assert!(
            words.contains("minLength: 1") && words.contains("maxLength: 1000"),
            "{words}"
        );
        assert_eq!(
            declared["properties"]["reason"]["enum"],
            parameters_schema()["properties"]["reason"]["enum"]
        );
        assert_eq!(declared["additionalProperties"], false);
    }
}
