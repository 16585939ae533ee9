//! The `issue_refund` tool: its declaration and the checks its arguments pass
//! before anything runs.
//!
//! The contract's schema is one constant. The validator is compiled from it
//! verbatim, so every rule is enforced here, whatever the model does. What is
//! declared to the model is derived from the same constant: OpenAI's `strict`
//! mode accepts only an allowlist of JSON Schema keywords and answers HTTP 400
//! to any other (`'minLength' is not permitted`), so such keywords move into
//! the property's `description`, where the model still reads them. `strict` is
//! defence in depth only; the derivation means the two can never drift apart.

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

static DECLARED: LazyLock<Value> = LazyLock::new(|| strict_compatible(&PARAMETERS));

static VALIDATOR: LazyLock<Validator> =
    LazyLock::new(|| jsonschema::validator_for(&PARAMETERS).expect("PARAMETERS_JSON is a valid JSON Schema"));

/// The contract's JSON Schema for `issue_refund`'s arguments, as validated.
pub fn parameters_schema() -> &'static Value {
    &PARAMETERS
}

/// The schema declared to the model with `strict: true`: [`parameters_schema`]
/// with the keywords strict mode refuses moved into descriptions.
pub fn declared_parameters() -> &'static Value {
    &DECLARED
}

/// The keywords OpenAI's strict mode accepts (Structured Outputs guide,
/// "Supported schemas"). Anything else makes the whole request fail with 400.
pub const STRICT_MODE_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "description",
    "enum",
    "const",
    "anyOf",
    "items",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Moves every keyword strict mode refuses into the schema's `description`,
/// recursively through `properties`.
fn strict_compatible(schema: &Value) -> Value {
    let Value::Object(fields) = schema else {
        return schema.clone();
    };
    let mut kept = serde_json::Map::new();
    let mut moved = Vec::new();
    for (key, value) in fields {
        if key == "properties" {
            let properties = value.as_object().map(|props| {
                props
                    .iter()
                    .map(|(name, prop)| (name.clone(), strict_compatible(prop)))
                    .collect()
            });
            kept.insert(
                key.clone(),
                properties.map(Value::Object).unwrap_or_else(|| value.clone()),
            );
        } else if STRICT_MODE_KEYWORDS.contains(&key.as_str()) {
            kept.insert(key.clone(), value.clone());
        } else {
            moved.push(format!("{key}: {value}"));
        }
    }
    if !moved.is_empty() {
        let existing = kept
            .get("description")
            .and_then(Value::as_str)
            .map(|d| format!("{d} "))
            .unwrap_or_default();
        kept.insert(
            "description".into(),
            Value::String(format!("{existing}({})", moved.join(", "))),
        );
    }
    Value::Object(kept)
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
    fn the_validated_schema_is_the_contract_schema() {
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
    fn the_declared_schema_is_the_contract_schema_in_strict_modes_words() {
        let declared = serde_json::json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "(minLength: 1)"},
                "amount_cents": {"type": "integer", "minimum": 1}
            },
            "required": ["order_id", "amount_cents"],
            "additionalProperties": false
        });
        assert_eq!(declared_parameters(), &declared);
    }

    #[test]
    fn the_declared_schema_uses_only_keywords_strict_mode_accepts() {
        fn check(schema: &Value) {
            let Some(fields) = schema.as_object() else { return };
            for (key, value) in fields {
                assert!(
                    STRICT_MODE_KEYWORDS.contains(&key.as_str()),
                    "strict mode would refuse {key:?}"
                );
                if key == "properties" {
                    value
                        .as_object()
                        .into_iter()
                        .flatten()
                        .for_each(|(_, prop)| check(prop));
                }
            }
        }
        check(declared_parameters());
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
