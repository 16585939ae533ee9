//! The `change_delivery_address` tool (contract 26): the agent's first
//! write that is not money. Its declaration, the checks its arguments pass,
//! the proposal's hash, and what the model reads back.
//!
//! The customer's yes is held in code, never by the model, by the one
//! mechanism every write goes through ([`crate::confirm`]): a first valid
//! call writes nothing and its proposal (a hash of the order id and the
//! address) is kept on the conversation; only a later turn whose customer
//! message is an explicit yes, calling again with exactly those arguments,
//! writes. What the model reads back names the address
//! only as "address ending in …": the tool holds the address, the prompt
//! holds references.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::refund::tool::{SchemaFailure, ToolSchema, no_such_order};

pub const TOOL_NAME: &str = "change_delivery_address";

pub const TOOL_DESCRIPTION: &str = "Change the delivery address of a customer's order that has not shipped, as \
     the customer wrote it (country: a two-letter code). The first call changes nothing: it returns status \
     confirm and a summary; ask the customer to answer yes. Only after their yes, call again with exactly the \
     same arguments: that changes it. Never say it changed unless the status is changed.";

/// The contract's schema (section 26), strict mode's form.
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"order_id":{"type":"string","minLength":1,"maxLength":64},"name":{"type":"string","minLength":1,"maxLength":100},"line1":{"type":"string","minLength":1,"maxLength":100},"line2":{"type":"string","maxLength":100},"postcode":{"type":"string","minLength":1,"maxLength":16},"city":{"type":"string","minLength":1,"maxLength":64},"country":{"type":"string","pattern":"^[A-Z]{2}$"}},"required":["order_id","name","line1","line2","postcode","city","country"],"additionalProperties":false}"#;

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

/// A delivery address. Personal data: its `Debug` shows only its reference.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
pub struct Address {
    pub name: String,
    pub line1: String,
    pub line2: String,
    pub postcode: String,
    pub city: String,
    pub country: String,
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Address({}, {})", self.reference(), self.country)
    }
}

impl Address {
    /// "address ending in <the postcode's last 3 characters>", as the
    /// order system's own addresses are shown ([`super::ShipTo::reference`]).
    pub fn reference(&self) -> String {
        super::ShipTo {
            name: String::new(),
            line1: String::new(),
            city: String::new(),
            postcode: self.postcode.clone(),
            country: self.country.clone(),
        }
        .reference()
    }

    /// The body of the order system's write (contract 26).
    pub fn body(&self) -> Value {
        json!({
            "name": self.name,
            "line1": self.line1,
            "line2": self.line2,
            "postcode": self.postcode,
            "city": self.city,
            "country": self.country,
        })
    }
}

/// A call's arguments, once they passed the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressArguments {
    pub order_id: String,
    pub address: Address,
}

impl AddressArguments {
    /// The proposal's hash: SHA-256 of the order id and the address, each
    /// field length-prefixed (so no two different calls share it), as a
    /// proposal keeps it instead of the address.
    pub fn hash(&self) -> [u8; 32] {
        let a = &self.address;
        crate::confirm::hash_of([
            self.order_id.as_str(),
            &a.name,
            &a.line1,
            &a.line2,
            &a.postcode,
            &a.city,
            &a.country,
        ])
    }

    /// What code says the change is, for the customer to confirm: the
    /// order and the address's reference, never the address itself (the
    /// customer wrote it; the model reads it back from the conversation).
    pub fn summary(&self) -> String {
        format!(
            "order {}: deliver to the {}, {}",
            crate::untrusted::order_id_for_event(&self.order_id),
            self.address.reference(),
            self.address.country
        )
    }
}

impl AddressArguments {
    /// Code's own line for the customer, added to the reply of the turn
    /// that proposed (never sent to the model, never logged): the whole new
    /// address as it will be written, so the customer's yes is to exactly
    /// that, whatever the model wrote around it.
    pub fn confirm_line(&self) -> String {
        let a = &self.address;
        let lines: Vec<&str> = [a.name.as_str(), a.line1.as_str(), a.line2.as_str()]
            .into_iter()
            .filter(|line| !line.trim().is_empty())
            .collect();
        format!(
            "To confirm: the delivery address of order {} becomes {}, {} {}, {}. Answer yes to change it; \
             anything else changes nothing.",
            crate::untrusted::order_id_for_event(&self.order_id),
            lines.join(", "),
            a.postcode,
            a.city,
            a.country
        )
    }
}

/// The arguments the model gave, once they passed the schema and the card check.
pub fn parse_arguments(raw: &str) -> Result<AddressArguments, SchemaFailure> {
    let value = SCHEMA.parse(TOOL_NAME, raw)?;
    let field = |name: &'static str| {
        value[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| SchemaFailure::invalid_field(TOOL_NAME, name))
    };
    let order_id = field("order_id")?;
    if crate::refund::tool::is_card_shaped(&order_id) {
        return Err(SchemaFailure::card_shaped_order_id(TOOL_NAME));
    }
    let arguments = AddressArguments {
        order_id,
        address: Address {
            name: field("name")?,
            line1: field("line1")?,
            line2: field("line2")?,
            postcode: field("postcode")?,
            city: field("city")?,
            country: field("country")?,
        },
    };
    let a = &arguments.address;
    for (name, value) in [
        ("order_id", &arguments.order_id),
        ("name", &a.name),
        ("line1", &a.line1),
        ("line2", &a.line2),
        ("postcode", &a.postcode),
        ("city", &a.city),
    ] {
        if value.chars().any(is_invisible) {
            return Err(SchemaFailure::Schema {
                tool: TOOL_NAME,
                problems: format!(
                    "{name} holds a control, format or bidirectional character, which the customer cannot read as \
                     written: ask the customer to type the address again"
                ),
                schema_paths: format!("/properties/{name}/visible_characters_only"),
            });
        }
    }
    Ok(arguments)
}

/// A character the customer's line would not show as it is written
/// (contract 26): controls (line breaks too), format characters (zero-width
/// spaces and joiners, bidirectional overrides and isolates, the soft
/// hyphen) and line or paragraph separators.
fn is_invisible(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// What a turn did about one order's address, as the conversation records
/// it (order, outcome; the exchange has when and the request id) and the
/// summary line counts it. Never the address.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AddressRecord {
    pub order_id: String,
    /// `proposed`, `changed`, or why not: `not_found`, `not_placed`,
    /// `country_not_served`, `unavailable`, `shipped_meanwhile`, `unknown`.
    pub outcome: &'static str,
}

/// What the order system's write answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressWrite {
    /// 200: the order's address is the new one.
    Changed,
    /// 409: it has shipped meanwhile (or was cancelled): nothing written.
    Shipped,
    /// Anything else: it may or may not have been written.
    Unknown(super::OrdersError),
}

impl AddressWrite {
    pub fn name(&self) -> &'static str {
        match self {
            AddressWrite::Changed => "changed",
            AddressWrite::Shipped => "shipped_meanwhile",
            AddressWrite::Unknown(_) => "unknown",
        }
    }
}

/// The first call's result: nothing written, the customer's yes awaited.
pub fn confirm(arguments: &AddressArguments) -> Value {
    json!({ "status": "confirm", "summary": arguments.summary() })
}

/// The confirmed call's result.
pub fn changed(arguments: &AddressArguments) -> Value {
    json!({ "status": "changed", "summary": arguments.summary() })
}

pub fn not_found(order_id: &str) -> Value {
    json!({ "error": no_such_order(order_id) })
}

pub fn not_placed(status: super::OrderStatus) -> Value {
    let what = match status {
        super::OrderStatus::Cancelled => "was cancelled",
        _ => "has shipped",
    };
    json!({
        "error": format!(
            "the order {what}: its delivery address can no longer be changed here, and nothing was written. A \
             person from the support team can help: offer to pass the customer to a person"
        )
    })
}

pub fn country_not_served(country: &str, allowed: &[String]) -> Value {
    json!({
        "error": format!(
            "the shop does not deliver this order to {country}: the address may be in {}. Nothing was written",
            allowed.join(", ")
        )
    })
}

pub fn unavailable() -> Value {
    json!({
        "error": "the order system is unavailable: nothing was written. Ask the customer to try again in a few \
                  minutes"
    })
}

pub fn shipped_meanwhile() -> Value {
    json!({
        "error": "the order shipped while this was being confirmed: its address was not changed. A person from the \
                  support team can help: offer to pass the customer to a person"
    })
}

pub fn unknown_outcome() -> Value {
    json!({
        "error": "the order system did not confirm the change: it may or may not have been made. A person from the \
                  support team will check it and tell the customer; do not say it was changed"
    })
}

pub fn one_per_order() -> Value {
    json!({ "error": "at most one change of address per order for each customer message" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments() -> String {
        json!({"order_id": "A-1004", "name": "Ada Lovelace", "line1": "12 Byron Road", "line2": "",
               "postcode": "N1 7AA", "city": "London", "country": "GB"})
        .to_string()
    }

    #[test]
    fn the_arguments_pass_the_contracts_schema_or_say_why_not() {
        let parsed = parse_arguments(&arguments()).unwrap();
        assert_eq!(parsed.address.postcode, "N1 7AA");
        for bad in [
            json!({"order_id": "A-1004"}),
            json!({"order_id": "A-1004", "name": "A", "line1": "l", "line2": "", "postcode": "p", "city": "c",
                   "country": "gb"}),
            json!({"order_id": "", "name": "A", "line1": "l", "line2": "", "postcode": "p", "city": "c",
                   "country": "GB"}),
            json!({"order_id": "A", "name": "A", "line1": "l", "line2": "", "postcode": "p".repeat(17),
                   "city": "c", "country": "GB"}),
        ] {
            assert!(parse_arguments(&bad.to_string()).is_err(), "{bad}");
        }
        let card = json!({"order_id": "4242 4242 4242 4242", "name": "A", "line1": "l", "line2": "",
                          "postcode": "p", "city": "c", "country": "GB"});
        assert!(parse_arguments(&card.to_string()).is_err());
    }

    #[test]
    fn a_field_the_customer_cannot_read_as_written_is_refused_by_its_rule() {
        for hidden in [
            "12 Byron\u{202e}daoR",
            "12\u{200b}Byron Road",
            "12 Byron\nRoad",
            "12\u{2066}Byron",
            "a\u{ad}b",
        ] {
            let raw = json!({"order_id": "A-1004", "name": "Ada", "line1": hidden, "line2": "",
                             "postcode": "N1 7AA", "city": "London", "country": "GB"});
            let error = parse_arguments(&raw.to_string()).unwrap_err();
            assert_eq!(error.schema_paths(), "/properties/line1/visible_characters_only");
            assert!(!error.to_string().contains("Byron"), "{error}");
        }
        // Accents, other scripts and punctuation are what addresses are made of.
        let raw = json!({"order_id": "A-1004", "name": "Zoë Ødegård", "line1": "Straße 1/3, Hinterhaus", "line2": "",
                         "postcode": "10115", "city": "Москва", "country": "DE"});
        assert!(parse_arguments(&raw.to_string()).is_ok());
    }

    #[test]
    fn a_field_that_fails_the_schema_is_described_by_its_rule_never_its_value() {
        let raw = json!({"order_id": "A-1004", "name": "Ada", "line1": "12 Byron Road", "line2": "",
                         "postcode": "QQ99 9QQ-SECRET-LONG", "city": "London", "country": "gb"});
        let error = parse_arguments(&raw.to_string()).unwrap_err().to_string();
        for value in ["QQ99", "SECRET", "\"gb\""] {
            assert!(!error.contains(value), "{value} in {error}");
        }
        assert!(error.contains("/postcode: must meet maxLength 16"), "{error}");
        assert!(error.contains("/country: must meet pattern"), "{error}");
    }

    #[test]
    fn the_hash_names_exactly_the_arguments() {
        let one = parse_arguments(&arguments()).unwrap();
        let mut other = one.clone();
        other.address.line2 = "Flat 2".into();
        assert_ne!(one.hash(), other.hash());
        // Fields are length-prefixed: moving text between them is another call.
        let mut moved = one.clone();
        moved.address.name = "Ada Lovelace1".into();
        moved.address.line1 = "2 Byron Road".into();
        assert_ne!(one.hash(), moved.hash());
        assert_eq!(one.hash(), parse_arguments(&arguments()).unwrap().hash());
    }

    #[test]
    fn what_the_model_reads_back_holds_no_address() {
        let parsed = parse_arguments(&arguments()).unwrap();
        for result in [confirm(&parsed), changed(&parsed)] {
            let text = result.to_string();
            for private in ["Ada", "Lovelace", "Byron", "London", "N1 7AA"] {
                assert!(!text.contains(private), "{private} in {text}");
            }
            assert!(text.contains("address ending in 7AA"), "{text}");
        }
        assert!(!format!("{parsed:?}").contains("Byron"));
    }
}
