//! The `get_order` tool (contract 16): its declaration, the checks its
//! arguments pass, and what the model reads back. Validated like the other
//! tools (the contract's schema verbatim, compiled once; strict mode's
//! refused keywords moved into descriptions). It moves no money and spends
//! no refund latch. Its result holds references, not personal data: the
//! address is "address ending in …", never the name, street, city or whole
//! postcode.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::{Order, OrderLookup};
use crate::refund::tool::{SchemaFailure, ToolSchema, no_such_order};

pub const TOOL_NAME: &str = "get_order";

pub const TOOL_DESCRIPTION: &str = "Look up one of the customer's orders in the shop's order system: its status \
     (placed, shipped, delivered, cancelled), when it was placed and delivered, what was paid and refunded and \
     what remains refundable, its items, and which address it went to. Use it whenever the customer asks about \
     an order (where it is, when it arrives, what it cost) and before a refund. order_id is the order's id \
     exactly as the customer gave it. Moves no money.";

/// At most this many reads of the order system per request come from the tool.
pub const MAX_READS: u32 = 3;

/// The contract's schema, verbatim (section 16).
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"order_id":{"type":"string","minLength":1,"maxLength":64}},"required":["order_id"],"additionalProperties":false}"#;

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

/// The order id the model asked for, once it passed the schema.
pub fn parse_arguments(raw: &str) -> Result<String, SchemaFailure> {
    let value = SCHEMA.parse(TOOL_NAME, raw)?;
    let order_id = value["order_id"]
        .as_str()
        .ok_or_else(|| SchemaFailure::invalid_field(TOOL_NAME, "order_id"))?;
    if crate::refund::tool::is_card_shaped(order_id) {
        return Err(SchemaFailure::card_shaped_order_id(TOOL_NAME));
    }
    Ok(order_id.to_owned())
}

/// What the model reads for an order: exactly the contract's fields.
pub fn result(order: &Order) -> Value {
    json!({
        "order_id": order.order_id,
        "status": order.status.as_str(),
        "placed_at": order.placed_at,
        "delivered_at": order.delivered_at,
        "currency": order.currency,
        "paid_cents": order.paid_cents,
        "refunded_cents": order.refunded_cents,
        "refundable_cents": order.refundable_cents(),
        "items": order.items.iter().map(|item| json!({
            "name": item.name,
            "quantity": item.quantity,
            "unit_price_cents": item.unit_price_cents,
        })).collect::<Vec<_>>(),
        "ship_to": order.ship_to.reference(),
    })
}

/// The tool's answer to a lookup, as the model reads it.
pub fn for_lookup(order_id: &str, lookup: &OrderLookup) -> Value {
    match lookup {
        OrderLookup::Found(order) => result(order),
        OrderLookup::NotFound => json!({ "error": no_such_order(order_id) }),
        OrderLookup::Unavailable(_) => json!({
            "error": "the order system is not available right now; tell the customer you cannot see the order at the moment"
        }),
    }
}

/// The answer to a read beyond [`MAX_READS`].
pub fn too_many_reads() -> Value {
    json!({ "error": format!("at most {MAX_READS} order lookups per message; use what you already found") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders::{Item, OrderStatus, OrdersError, ShipTo};

    fn order() -> Order {
        Order {
            order_id: "A-1001".into(),
            customer_id: "u-1001".into(),
            email: None,
            status: OrderStatus::Shipped,
            placed_at: "2026-11-20T10:00:00Z".into(),
            placed_at_ms: 0,
            delivered_at: None,
            delivered_at_ms: None,
            currency: "EUR".into(),
            paid_cents: 4500,
            refunded_cents: 500,
            items: vec![Item {
                name: "Mug".into(),
                quantity: 3,
                unit_price_cents: 1500,
                returned_quantity: 0,
            }],
            ship_to: ShipTo {
                name: "Ada Quokka".into(),
                line1: "1 Zanzibar Lane".into(),
                city: "Lyon".into(),
                postcode: "69002".into(),
                country: "FR".into(),
            },
            has_open_return: false,
            open_return_cents: 0,
        }
    }

    #[test]
    fn the_result_is_the_contracts_fields_and_no_personal_data() {
        let value = result(&order());
        let mut fields: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "currency",
                "delivered_at",
                "items",
                "order_id",
                "paid_cents",
                "placed_at",
                "refundable_cents",
                "refunded_cents",
                "ship_to",
                "status"
            ]
        );
        assert_eq!(value["refundable_cents"], 4000);
        assert_eq!(value["ship_to"], "address ending in 002");
        assert_eq!(value["delivered_at"], Value::Null);
        let text = value.to_string();
        for personal in ["Ada Quokka", "Zanzibar", "Lyon", "69002"] {
            assert!(!text.contains(personal), "{personal} in {text}");
        }
    }

    #[test]
    fn a_lookup_that_found_nothing_is_a_tool_error_naming_the_order() {
        assert_eq!(
            for_lookup("A-9", &OrderLookup::NotFound),
            json!({"error": "no order A-9 for this customer"})
        );
        let unavailable = for_lookup("A-9", &OrderLookup::Unavailable(OrdersError::Timeout));
        assert!(unavailable["error"].as_str().unwrap().contains("not available"));
    }

    #[test]
    fn arguments_are_checked_against_the_contracts_schema() {
        assert_eq!(parse_arguments(r#"{"order_id":"A-1001"}"#), Ok("A-1001".into()));
        for bad in [
            r#"{"order_id":""}"#,
            r#"{"order_id":1}"#,
            r#"{}"#,
            r#"{"order_id":"A","extra":1}"#,
            "not json",
        ] {
            assert!(parse_arguments(bad).is_err(), "{bad}");
        }
        assert!(parse_arguments(&format!(r#"{{"order_id":"{}"}}"#, "A".repeat(65))).is_err());
        assert!(parse_arguments(&format!(r#"{{"order_id":"{}"}}"#, "A".repeat(64))).is_ok());
        // A card number is never an order id, and the error names no digit.
        let card = parse_arguments(r#"{"order_id":"4242 4242 4242 4242"}"#).unwrap_err();
        assert!(!card.to_string().contains("4242"), "{card}");
        assert_eq!(card.schema_paths(), "/properties/order_id/not_a_card_number");
        assert!(parse_arguments(r#"{"order_id":"940-4242424-2424242"}"#).is_ok());
        let declared = declared_parameters().to_string();
        assert!(
            !declared.contains("\"maxLength\""),
            "strict mode refuses maxLength: {declared}"
        );
    }
}
