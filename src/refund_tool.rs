//! The `issue_refund` tool: its declaration and the checks its arguments pass
//! before anything runs.
//!
//! The schema is one constant. The very value declared to the model is the one
//! the validator is compiled from, so the two can never drift apart. `strict`
//! mode on the model side is defence in depth only: a model (or a compatible
//! server) may ignore it, so every rule is enforced here.

use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::Value;

pub const TOOL_NAME: &str = "issue_refund";

pub const TOOL_DESCRIPTION: &str = "Refund money to the customer for one of their orders. \
     Moves real money at once and can be used at most once per conversation. \
     order_id is the order's id exactly as the customer gave it; amount_cents is the amount \
     in cents (12.50 is 1250).";

/// The contract's schema, verbatim (section 2).
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"order_id":{"type":"string","minLength":1},"amount_cents":{"type":"integer","minimum":1}},"required":["order_id","amount_cents"],"additionalProperties":false}"#;

static PARAMETERS: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(PARAMETERS_JSON).expect("PARAMETERS_JSON is a compile-time constant"));

static VALIDATOR: LazyLock<Validator> =
    LazyLock::new(|| jsonschema::validator_for(&PARAMETERS).expect("PARAMETERS_JSON is a valid JSON Schema"));

/// The JSON Schema declared to the model for `issue_refund`'s arguments.
pub fn parameters_schema() -> &'static Value {
    &PARAMETERS
}

/// Compiles the validator now rather than on the first tool call.
pub fn warm_up() {
    LazyLock::force(&VALIDATOR);
}

/// Arguments that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundArguments {
    pub order_id: String,
    pub amount_cents: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error("the arguments are not valid JSON")]
    NotJson,
    #[error("the arguments do not match the issue_refund schema: {0}")]
    Schema(String),
    #[error("amount_cents is too large")]
    AmountOutOfRange,
}

/// Parses and validates the raw arguments text of an `issue_refund` call.
pub fn parse_arguments(raw: &str) -> Result<RefundArguments, ArgumentError> {
    let value: Value = serde_json::from_str(raw).map_err(|_| ArgumentError::NotJson)?;
    let problems: Vec<String> = VALIDATOR.iter_errors(&value).map(|error| describe(&error)).collect();
    if !problems.is_empty() {
        return Err(ArgumentError::Schema(problems.join("; ")));
    }
    // The schema guarantees both fields; they are read defensively anyway so a
    // schema change can never turn into a panic.
    let order_id = value["order_id"]
        .as_str()
        .ok_or_else(|| ArgumentError::Schema("order_id must be a string".into()))?;
    let amount_cents = whole_cents(&value["amount_cents"])?;
    Ok(RefundArguments {
        order_id: order_id.to_owned(),
        amount_cents,
    })
}

/// JSON Schema counts `1250.0` as an integer, so accept exactly what the
/// validator accepted, as long as it is a whole number of cents that fits.
fn whole_cents(value: &Value) -> Result<u64, ArgumentError> {
    if let Some(cents) = value.as_u64() {
        return Ok(cents);
    }
    // 2^53: beyond it an f64 no longer holds every whole number exactly.
    const LARGEST_EXACT_F64: f64 = 9_007_199_254_740_992.0;
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && (1.0..=LARGEST_EXACT_F64).contains(&f) => Ok(f as u64),
        Some(_) => Err(ArgumentError::AmountOutOfRange),
        None => Err(ArgumentError::Schema("amount_cents must be an integer".into())),
    }
}

fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    let path = error.instance_path().to_string();
    if path.is_empty() {
        error.to_string()
    } else {
        format!("{path}: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_schema_is_the_contract_schema() {
        let contract: Value = serde_json::json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "minLength": 1},
                "amount_cents": {"type": "integer", "minimum": 1}
            },
            "required": ["order_id", "amount_cents"],
            "additionalProperties": false
        });
        assert_eq!(parameters_schema(), &contract);
    }

    #[test]
    fn valid_arguments_parse() {
        assert_eq!(
            parse_arguments(r#"{"order_id":"A-1","amount_cents":1250}"#),
            Ok(RefundArguments {
                order_id: "A-1".into(),
                amount_cents: 1250
            })
        );
        assert_eq!(
            parse_arguments(r#"{"order_id":"A-1","amount_cents":1250.0}"#).map(|a| a.amount_cents),
            Ok(1250)
        );
    }

    #[test]
    fn every_schema_rule_is_enforced() {
        let rejected = [
            r#"{"amount_cents":100}"#,
            r#"{"order_id":"A-1"}"#,
            r#"{"order_id":"A-1","amount_cents":100,"note":"x"}"#,
            r#"{"order_id":"A-1","amount_cents":0}"#,
            r#"{"order_id":"A-1","amount_cents":-5}"#,
            r#"{"order_id":"A-1","amount_cents":"100"}"#,
            r#"{"order_id":"A-1","amount_cents":12.5}"#,
            r#"{"order_id":"","amount_cents":100}"#,
            r#"{"order_id":42,"amount_cents":100}"#,
            r#"["A-1",100]"#,
        ];
        for raw in rejected {
            assert!(
                matches!(parse_arguments(raw), Err(ArgumentError::Schema(_))),
                "{raw} was accepted"
            );
        }
        assert_eq!(parse_arguments("{not json"), Err(ArgumentError::NotJson));
        assert_eq!(
            parse_arguments(r#"{"order_id":"A-1","amount_cents":1e30}"#),
            Err(ArgumentError::AmountOutOfRange)
        );
    }
}
