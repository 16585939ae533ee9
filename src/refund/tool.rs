//! The `issue_refund` tool: its declaration, the checks its arguments pass
//! before anything runs, and the results the model reads back.
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
use serde::Serialize;
use serde_json::Value;

use crate::refund::money::AmountCents;
use crate::refund::policy::OrderRefusal;
use crate::refund::{RefundError, RefundOutcome, RefundState, Resolution};

pub const TOOL_NAME: &str = "issue_refund";

pub const TOOL_DESCRIPTION: &str = "Refund money to the customer for one of their orders. \
     Moves real money at once and can be used at most once per customer message. \
     order_id is the order's id exactly as the customer gave it; amount_cents is the amount \
     in cents (12.50 is 1250).";

/// The contract's schema, verbatim (section 2).
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"order_id":{"type":"string","minLength":1},"amount_cents":{"type":"integer","minimum":1}},"required":["order_id","amount_cents"],"additionalProperties":false}"#;

static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| ToolSchema::compile(PARAMETERS_JSON));

/// A tool's arguments schema, compiled once: the contract's, verbatim, as
/// validated, and the form declared to the model in strict mode.
pub struct ToolSchema {
    parameters: Value,
    declared: Value,
    validator: Validator,
}

impl ToolSchema {
    /// `json` is a compile-time constant of this crate, so a failure here is
    /// a bug the first test finds, never a request's doing.
    pub fn compile(json: &'static str) -> ToolSchema {
        let parameters: Value = serde_json::from_str(json).expect("a tool schema is a compile-time constant");
        ToolSchema {
            declared: strict_compatible(&parameters),
            // Draft 7: the tool schemas use none of 2020-12's additions, and
            // its meta-schema, which compiling checks the schema against, is
            // one document, not 2020-12's eight linked by `$dynamicRef`
            // (3.9 M instructions of a cold start: docs/benchmarks.md).
            validator: jsonschema::draft7::new(&parameters).expect("a tool schema is a valid JSON Schema"),
            parameters,
        }
    }

    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    pub fn declared(&self) -> &Value {
        &self.declared
    }

    /// Reads a tool call's raw arguments of the tool `tool`: JSON that
    /// passes the schema, or why not.
    pub fn parse(&self, tool: &'static str, raw: &str) -> Result<Value, SchemaFailure> {
        let value: Value = serde_json::from_str(raw).map_err(|_| SchemaFailure::NotJson)?;
        match self.failures(&value) {
            Some((problems, schema_paths)) => Err(SchemaFailure::Schema {
                tool,
                problems,
                schema_paths,
            }),
            None => Ok(value),
        }
    }

    /// How `value` fails the schema, if it does: what the model is told
    /// (each field by the rule it fails, never by its value: a value may be
    /// an address or a card number, and the result is stored), and the
    /// schema's paths, for logs.
    pub fn failures(&self, value: &Value) -> Option<(String, String)> {
        let errors: Vec<jsonschema::ValidationError<'_>> = self.validator.iter_errors(value).collect();
        (!errors.is_empty()).then(|| {
            (
                errors
                    .iter()
                    .map(|error| self.describe(error))
                    .collect::<Vec<_>>()
                    .join("; "),
                errors
                    .iter()
                    .map(|error| error.schema_path().to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        })
    }
}

impl ToolSchema {
    /// A failure as the rule it broke: the field (`/postcode`, or "the
    /// arguments") and the schema's keyword with its value there
    /// (`maxLength 16`), read from the schema, never from the instance.
    fn describe(&self, error: &jsonschema::ValidationError<'_>) -> String {
        let field = error.instance_path().to_string();
        let field = if field.is_empty() {
            "the arguments".to_owned()
        } else {
            field
        };
        let rule_path = error.schema_path().to_string();
        let keyword = rule_path.rsplit('/').next().unwrap_or_default();
        match self.parameters.pointer(&rule_path) {
            Some(Value::Bool(false)) if keyword == "additionalProperties" => {
                format!("{field}: no other properties are allowed")
            }
            Some(rule) => format!("{field}: must meet {keyword} {rule}"),
            None => format!("{field}: must meet {keyword}"),
        }
    }
}

/// The contract's JSON Schema for `issue_refund`'s arguments, as validated.
pub fn parameters_schema() -> &'static Value {
    SCHEMA.parameters()
}

/// The schema declared to the model with `strict: true`: [`parameters_schema`]
/// with the keywords strict mode refuses moved into descriptions.
pub fn declared_parameters() -> &'static Value {
    SCHEMA.declared()
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
/// recursively through `properties` and an array's `items`.
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
        } else if key == "items" {
            kept.insert(key.clone(), strict_compatible(value));
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
    LazyLock::force(&SCHEMA);
}

/// Arguments that passed every check.
/// Why a read-only tool's arguments were not run (`hand_off_to_person`,
/// `get_order`): not JSON, or not the tool's schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaFailure {
    #[error("the arguments are not valid JSON")]
    NotJson,
    /// `problems` is for the model; `schema_paths` for logs.
    #[error("the arguments do not match the {tool} schema: {problems}")]
    Schema {
        tool: &'static str,
        problems: String,
        schema_paths: String,
    },
}

impl SchemaFailure {
    /// What a log line may say of the failure: the schema's rules that
    /// failed, never the values the model sent.
    pub fn schema_paths(&self) -> &str {
        match self {
            SchemaFailure::NotJson => "not_json",
            SchemaFailure::Schema { schema_paths, .. } => schema_paths,
        }
    }

    /// An order id that section 23's masking would change: a card number
    /// or an IBAN is never an order id, and is never recorded, logged or
    /// put in an event (contract 23). The message names no digit.
    pub fn card_shaped_order_id(tool: &'static str) -> SchemaFailure {
        SchemaFailure::Schema {
            tool,
            problems: CARD_SHAPED_ORDER_ID.to_owned(),
            schema_paths: "/properties/order_id/not_a_card_number".to_owned(),
        }
    }

    /// A field the schema let through that code cannot read: a schema
    /// change must never become a panic.
    pub fn invalid_field(tool: &'static str, field: &str) -> SchemaFailure {
        SchemaFailure::Schema {
            tool,
            problems: format!("{field} is not valid"),
            schema_paths: format!("/properties/{field}"),
        }
    }
}

/// What the model is told of an order id that is a card number or an IBAN.
const CARD_SHAPED_ORDER_ID: &str =
    "order_id is a card number or an IBAN, never an order id: ask the customer for the order's id";

/// An `order_id` that holds a card number or an IBAN (contract 23).
pub fn is_card_shaped(order_id: &str) -> bool {
    crate::mask::would_mask(order_id)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundArguments {
    pub order_id: String,
    pub amount: AmountCents,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error("the arguments are not valid JSON")]
    NotJson,
    /// `problems` is for the model (it quotes the offending values);
    /// `schema_paths` names only the schema's rules, for logs.
    #[error("the arguments do not match the issue_refund schema: {problems}")]
    Schema { problems: String, schema_paths: String },
    #[error("amount_cents is too large")]
    AmountOutOfRange,
}

impl ArgumentError {
    /// What a log line may say of the failure: the schema's rules that
    /// failed, never the values the model sent.
    pub fn schema_paths(&self) -> &str {
        match self {
            ArgumentError::NotJson => "not_json",
            ArgumentError::Schema { schema_paths, .. } => schema_paths,
            ArgumentError::AmountOutOfRange => "/properties/amount_cents/range",
        }
    }
}

/// Parses and validates the raw arguments text of an `issue_refund` call.
pub fn parse_arguments(raw: &str) -> Result<RefundArguments, ArgumentError> {
    let value: Value = serde_json::from_str(raw).map_err(|_| ArgumentError::NotJson)?;
    if let Some((problems, schema_paths)) = SCHEMA.failures(&value) {
        return Err(ArgumentError::Schema { problems, schema_paths });
    }
    // The schema guarantees both fields; they are read defensively anyway so a
    // schema change can never turn into a panic.
    let order_id = value["order_id"].as_str().ok_or_else(|| ArgumentError::Schema {
        problems: "order_id must be a string".into(),
        schema_paths: "/properties/order_id/type".into(),
    })?;
    if is_card_shaped(order_id) {
        return Err(ArgumentError::Schema {
            problems: CARD_SHAPED_ORDER_ID.to_owned(),
            schema_paths: "/properties/order_id/not_a_card_number".to_owned(),
        });
    }
    let amount = whole_cents(&value["amount_cents"])?;
    Ok(RefundArguments {
        order_id: order_id.to_owned(),
        amount,
    })
}

/// JSON Schema counts `1250.0` as an integer, so accept exactly what the
/// validator accepted, as long as it is a whole number of cents that fits.
fn whole_cents(value: &Value) -> Result<AmountCents, ArgumentError> {
    if let Some(cents) = value.as_u64() {
        return Ok(AmountCents::new(cents));
    }
    // 2^53: beyond it an f64 no longer holds every whole number exactly.
    const LARGEST_EXACT_F64: f64 = 9_007_199_254_740_992.0;
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && (1.0..=LARGEST_EXACT_F64).contains(&f) => Ok(AmountCents::new(f as u64)),
        Some(_) => Err(ArgumentError::AmountOutOfRange),
        None => Err(ArgumentError::Schema {
            problems: "amount_cents must be an integer".into(),
            schema_paths: "/properties/amount_cents/type".into(),
        }),
    }
}

/// The content of a `role: "tool"` message: the only thing the model learns
/// of what a tool call did. Never an HTTP error (contract 2).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolResult {
    /// A refund made now: the receipt, nothing else from payments.
    Receipt {
        refund_id: String,
        status: String,
        amount_cents: AmountCents,
    },
    /// A refund this scope had already made, found in the ledger.
    AlreadyRefunded {
        refund_id: String,
        status: String,
        amount_cents: AmountCents,
        already_refunded: bool,
        note: &'static str,
    },
    /// Sent to a person (contract 8): not an error.
    PendingApproval {
        status: &'static str,
        approval_id: String,
        reasons: Vec<String>,
    },
    Error {
        error: String,
    },
}

const MAY_HAVE_MOVED: &str = "The refund may or may not have been made: do not promise either and do not try \
                              again; tell the customer that the support team will check the refund and confirm it.";

impl ToolResult {
    pub fn error(reason: impl Into<String>) -> Self {
        ToolResult::Error { error: reason.into() }
    }

    pub fn second_refund_refused() -> Self {
        ToolResult::error(
            "a refund was already attempted in this request and only one refund can be made per request; \
             tell the customer the support team will handle any further refund",
        )
    }

    /// What the model is told of a refund's outcome.
    /// What the model reads of a refund's outcome; `order_id` is the one it asked for.
    pub fn for_outcome(outcome: &RefundOutcome, order_id: &str) -> Self {
        match outcome {
            RefundOutcome::OrderRefused(OrderRefusal::NotFound) => ToolResult::error(no_such_order(order_id)),
            RefundOutcome::OrderRefused(OrderRefusal::AboveRefundable { refundable }) => ToolResult::error(format!(
                "only {refundable} remains refundable on order {order_id} ({} cents); no refund was made",
                refundable.cents()
            )),
            RefundOutcome::Executed(receipt) => ToolResult::Receipt {
                refund_id: receipt.refund_id.clone(),
                status: receipt.status.clone(),
                amount_cents: receipt.amount_cents,
            },
            RefundOutcome::Rejected { detail, .. } => {
                ToolResult::error(format!("the payments service rejected the refund: {detail}"))
            }
            RefundOutcome::Unknown(error) => ToolResult::error(unknown_outcome(error)),
            RefundOutcome::AlreadyRecorded(prior) => {
                let confirmed = match (&prior.receipt, &prior.resolution) {
                    (Some(receipt), _) => Some((receipt.refund_id.clone(), receipt.status.clone())),
                    (None, Some(Resolution::Executed { refund_id })) => Some((refund_id.clone(), "confirmed".into())),
                    _ => None,
                };
                match confirmed {
                    Some((refund_id, status)) => ToolResult::AlreadyRefunded {
                        refund_id,
                        status,
                        amount_cents: prior.amount,
                        already_refunded: true,
                        note: "this refund was already made for this message; do not make it again",
                    },
                    None if prior.moved_no_money() => ToolResult::error(
                        "a refund for this message was already tried and refused; no money moved; do not \
                         try again and tell the customer the support team can help",
                    ),
                    None if prior.state == RefundState::AwaitingApproval => ToolResult::error(
                        "a refund for this message is already waiting for a person to approve it; tell the \
                         customer the support team will review it, and do not try again",
                    ),
                    None => ToolResult::error(format!(
                        "a refund for this message was already attempted and its outcome is not confirmed. \
                         {MAY_HAVE_MOVED}"
                    )),
                }
            }
            RefundOutcome::PendingApproval { approval_id, reasons } => ToolResult::PendingApproval {
                status: "pending_approval",
                approval_id: approval_id.clone(),
                reasons: reasons.clone(),
            },
            RefundOutcome::Unrecorded => ToolResult::error(
                "refunds cannot be made right now (the refund could not be recorded, so no money moved); do \
                 not try again and tell the customer that a person from the support team will follow up",
            ),
        }
    }

    /// The tool message's content.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| r#"{"error":"internal error"}"#.to_owned())
    }
}

/// The tool error for an order the order system does not have for this
/// customer (contract 16), from `get_order` and `issue_refund` alike.
pub fn no_such_order(order_id: &str) -> String {
    format!("no order {order_id} for this customer")
}

fn unknown_outcome(error: &RefundError) -> String {
    format!("{error}. {MAY_HAVE_MOVED}")
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
                amount: AmountCents::new(1250)
            })
        );
        assert_eq!(
            parse_arguments(r#"{"order_id":"A-1","amount_cents":1250.0}"#).map(|a| a.amount),
            Ok(AmountCents::new(1250))
        );
    }

    #[test]
    fn a_card_number_as_order_id_is_a_tool_error_that_names_no_digit() {
        for card in ["4242424242424242", "4242.4242.4242.4242", "GB82 WEST 1234 5698 7654 32"] {
            let error = parse_arguments(&format!(r#"{{"order_id":"{card}","amount_cents":1250}}"#)).unwrap_err();
            assert_eq!(error.schema_paths(), "/properties/order_id/not_a_card_number");
            assert!(
                !error.to_string().contains("4242") && !error.to_string().contains("5432"),
                "{error}"
            );
        }
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
                matches!(parse_arguments(raw), Err(ArgumentError::Schema { .. })),
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

#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// The contract's rules for `issue_refund`'s arguments, written out by
    /// hand: a second, independent reading of the schema.
    fn independently_valid(arguments: &Value) -> bool {
        let Some(fields) = arguments.as_object() else {
            return false;
        };
        let known = fields.keys().all(|k| k == "order_id" || k == "amount_cents");
        let order_id = fields
            .get("order_id")
            .and_then(Value::as_str)
            .is_some_and(|id| id.chars().count() >= 1);
        let amount = match fields.get("amount_cents") {
            Some(Value::Number(n)) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(cents), _, _) => cents >= 1,
                (None, Some(_), _) => false,
                (None, None, Some(f)) => f.fract() == 0.0 && f >= 1.0,
                _ => false,
            },
            _ => false,
        };
        known && order_id && amount
    }

    fn amount() -> impl Strategy<Value = Value> {
        prop_oneof![
            (-2i64..3).prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e20f64..1e20).prop_map(Value::from),
            Just(json!(1250.0)),
            Just(json!(12.5)),
            Just(json!(1e30)),
            Just(json!("1250")),
            Just(Value::Null),
        ]
    }

    fn order_id() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::from("")),
            ".{0,6}".prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            Just(Value::Null)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn the_validator_agrees_with_the_rules(
            order in proptest::option::weighted(0.9, order_id()),
            amount in proptest::option::weighted(0.9, amount()),
            extra in proptest::option::weighted(0.1, any::<bool>()),
            not_an_object in proptest::bool::weighted(0.05),
        ) {
            let mut fields = serde_json::Map::new();
            if let Some(v) = order { fields.insert("order_id".into(), v); }
            if let Some(v) = amount { fields.insert("amount_cents".into(), v); }
            if let Some(v) = extra { fields.insert("reason".into(), v.into()); }
            let arguments = if not_an_object { Value::Array(fields.values().cloned().collect()) } else { Value::Object(fields) };
            let parsed = parse_arguments(&arguments.to_string());
            let too_large = arguments["amount_cents"].as_f64().is_some_and(|f| f > 9_007_199_254_740_992.0)
                && arguments["amount_cents"].as_u64().is_none();
            prop_assert_eq!(parsed.is_ok(), independently_valid(&arguments) && !too_large, "{}", arguments);
            if let Ok(parsed) = parsed {
                prop_assert_eq!(Some(parsed.order_id.as_str()), arguments["order_id"].as_str());
                prop_assert_eq!(parsed.amount.cents() as f64, arguments["amount_cents"].as_f64().unwrap_or_default());
            }
        }

        #[test]
        fn any_text_is_answered_without_a_panic(raw in ".{0,64}") {
            let _ = parse_arguments(&raw);
        }
    }
}
