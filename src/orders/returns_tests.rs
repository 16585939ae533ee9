use serde_json::json;

use super::*;
use crate::orders::{Item, OrderStatus};

const DAY_MS: u64 = 86_400_000;

fn args(items: serde_json::Value, reason: &str) -> String {
    json!({"order_id": "A-1002", "items": items, "reason": reason}).to_string()
}

fn mug(quantity: u32) -> serde_json::Value {
    json!([{"name": "Blue mug", "quantity": quantity}])
}

fn delivered(days_ago: u64, now_ms: u64) -> Order {
    Order {
        order_id: "A-1002".into(),
        customer_id: "u-1".into(),
        email: None,
        status: OrderStatus::Delivered,
        placed_at: String::new(),
        placed_at_ms: 0,
        delivered_at: None,
        delivered_at_ms: Some(now_ms - days_ago * DAY_MS),
        currency: "EUR".into(),
        paid_cents: 2500,
        refunded_cents: 0,
        items: vec![Item {
            name: "Blue mug".into(),
            quantity: 2,
            unit_price_cents: 1250,
            returned_quantity: 0,
        }],
        ship_to: crate::orders::ShipTo {
            name: "n".into(),
            line1: "l".into(),
            city: "c".into(),
            postcode: "p".into(),
            country: "GB".into(),
        },
        has_open_return: false,
        open_return_cents: 0,
    }
}

#[test]
fn the_arguments_pass_the_contracts_schema_or_say_why_not() {
    let parsed = parse_arguments(&args(mug(1), "changed_mind")).unwrap();
    assert_eq!(
        parsed.items,
        [ReturnItem {
            name: "Blue mug".into(),
            quantity: 1
        }]
    );
    assert_eq!(parsed.reason, ReturnReason::ChangedMind);
    for bad in [
        args(json!([]), "changed_mind"),
        args(mug(0), "changed_mind"),
        args(mug(100), "changed_mind"),
        args(mug(1), "because"),
        args(json!([{"name": "", "quantity": 1}]), "wrong_size"),
        args(json!([{"name": "x".repeat(201), "quantity": 1}]), "wrong_size"),
        args(
            json!([{"name": "Blue mug", "quantity": 1, "colour": "red"}]),
            "wrong_size",
        ),
        json!({"order_id": "A-1002", "items": mug(1)}).to_string(),
        json!({"order_id": "4242 4242 4242 4242", "items": mug(1), "reason": "wrong_size"}).to_string(),
    ] {
        assert!(parse_arguments(&bad).is_err(), "{bad}");
    }
    let too_many: Vec<serde_json::Value> = (0..21)
        .map(|i| json!({"name": format!("item {i}"), "quantity": 1}))
        .collect();
    assert!(parse_arguments(&args(json!(too_many), "wrong_size")).is_err());
}

#[test]
fn the_declared_schema_is_strict_modes_form_all_the_way_down() {
    let declared = declared_parameters().to_string();
    for refused in ["\"maxLength\"", "\"minLength\""] {
        assert!(!declared.contains(refused), "strict mode refuses {refused}: {declared}");
    }
    assert!(
        declared.contains("maxLength: 200"),
        "the rule stays, as words: {declared}"
    );
}

#[test]
fn the_same_return_is_the_same_hash_whatever_order_the_lines_came_in() {
    let one = parse_arguments(&args(
        json!([{"name": "Blue mug", "quantity": 1}, {"name": "Linen cushion", "quantity": 1}]),
        "changed_mind",
    ))
    .unwrap();
    let reordered = parse_arguments(&args(
        json!([{"name": "Linen cushion", "quantity": 1}, {"name": "Blue mug", "quantity": 1}]),
        "changed_mind",
    ))
    .unwrap();
    assert_eq!(one.hash(), reordered.hash());
    let split = parse_arguments(&args(
        json!([{"name": "Blue mug", "quantity": 1}, {"name": "Blue mug", "quantity": 1}]),
        "changed_mind",
    ))
    .unwrap();
    assert_eq!(
        split.items,
        [ReturnItem {
            name: "Blue mug".into(),
            quantity: 2
        }]
    );
    for other in [
        args(mug(2), "changed_mind"),
        args(mug(1), "wrong_size"),
        args(json!([{"name": "Blue mu", "quantity": 1}]), "changed_mind"),
    ] {
        assert_ne!(
            parse_arguments(&other).unwrap().hash(),
            parse_arguments(&args(mug(1), "changed_mind")).unwrap().hash()
        );
    }
}

#[test]
fn the_checks_read_the_order_and_say_why_not() {
    let now = 100 * DAY_MS;
    let one = parse_arguments(&args(mug(1), "changed_mind")).unwrap();
    let refund = check(&delivered(3, now), &one, 30, now).unwrap();
    assert_eq!(refund.to_string(), "12.50 EUR");
    // The window's last day is in it; the day after is not.
    assert!(check(&delivered(30, now), &one, 30, now).is_ok());
    assert_eq!(
        check(&delivered(31, now), &one, 30, now),
        Err(Refusal::OutsideWindow { days: 30 })
    );
    assert!(check(&delivered(31, now), &one, 45, now).is_ok());
    let mut shipped = delivered(3, now);
    shipped.status = OrderStatus::Shipped;
    assert_eq!(
        check(&shipped, &one, 30, now),
        Err(Refusal::NotDelivered(OrderStatus::Shipped))
    );
    let mut open = delivered(3, now);
    open.has_open_return = true;
    assert_eq!(check(&open, &one, 30, now), Err(Refusal::ReturnOpen));
    let mut returned = delivered(3, now);
    returned.items[0].returned_quantity = 2;
    assert_eq!(
        check(&returned, &one, 30, now),
        Err(Refusal::MoreThanHolds {
            name: "Blue mug".into(),
            returnable: 0
        })
    );
    let three = parse_arguments(&args(mug(3), "changed_mind")).unwrap();
    assert!(matches!(
        check(&delivered(3, now), &three, 30, now),
        Err(Refusal::MoreThanHolds { returnable: 2, .. })
    ));
    let other = parse_arguments(&args(json!([{"name": "blue mug", "quantity": 1}]), "changed_mind")).unwrap();
    let refused = check(&delivered(3, now), &other, 30, now).unwrap_err();
    assert_eq!(refused.outcome(), "not_on_order");
    let told = refused.result(&delivered(3, now)).to_string();
    assert!(
        told.contains("\\\"Blue mug\\\"") && told.contains("Nothing was written"),
        "{told}"
    );
}

#[test]
fn code_names_the_return_to_the_customer_and_the_model_never_reads_the_label() {
    let one = parse_arguments(&args(mug(1), "changed_mind")).unwrap();
    let refund = Refund {
        amount: AmountCents::new(1250),
        currency: "EUR".into(),
    };
    assert_eq!(
        one.confirm_line(&refund),
        "To confirm: return from order A-1002: 1 × Blue mug, reason: changed my mind; refund of 12.50 EUR once it \
         arrives. Answer yes to start it; anything else starts nothing."
    );
    let begun = StartedReturn {
        return_id: "ret_000001".into(),
        label_url: "https://labels.carrier.example/l/ret_000001?sig=abc".into(),
        refund_cents: 1250,
        expires_at: "2026-12-20T00:00:00Z".into(),
    };
    let for_model = started(&one, &begun, "EUR").to_string();
    assert!(
        !for_model.contains("labels.carrier.example") && !for_model.contains("http"),
        "{for_model}"
    );
    assert!(
        for_model.contains("ret_000001") && for_model.contains("12.50 EUR"),
        "{for_model}"
    );

    // The label travels apart from the text (contract 28): the line points
    // at it and never holds its URL.
    let (line, label) = started_line(
        "A-1002",
        &begun,
        "EUR",
        &["https://labels.carrier.example".into()],
        &jiff::tz::TimeZone::get("Europe/Paris").unwrap(),
    );
    let label = label.expect("a label");
    assert_eq!(label.url, "https://labels.carrier.example/l/ret_000001?sig=abc");
    // "Use it by" in code's words: the shop's zone, to the minute (contract 36).
    let use_by = label.use_by.expect("in words");
    assert!(use_by.ends_with("(Europe/Paris)") && !use_by.contains('T'), "{use_by}");
    assert!(
        !line.contains("http") && line.contains(&format!("label is below (use it by {use_by})")),
        "{line}"
    );
    for origins in [
        vec![],
        vec!["https://carrier.example".to_owned()],
        vec!["http://labels.carrier.example".to_owned()],
        vec!["https://labels.carrier.example:8443".to_owned()],
    ] {
        let (named, label) = started_line("A-1002", &begun, "EUR", &origins, &jiff::tz::TimeZone::UTC);
        assert_eq!(label, None, "{origins:?}");
        assert!(!named.contains("http"), "{origins:?}: {named}");
        assert!(named.contains("return ret_000001"), "{named}");
    }
}

#[test]
fn only_a_label_on_an_allowed_origin_is_a_link() {
    let allowed = ["https://labels.example".to_owned()];
    assert!(linkable("https://labels.example/x", &allowed).is_some());
    for url in [
        "https://labels.example.evil.test/x",
        "https://evil.test/?https://labels.example/x",
        "https://user@labels.example/x",
        "javascript:alert(1)",
        "https://labels.example:444/x",
        "not a url",
    ] {
        assert_eq!(linkable(url, &allowed), None, "{url}");
    }
}

#[test]
fn a_damaged_wrong_or_misdescribed_item_needs_a_person() {
    for (reason, person) in [
        ("changed_mind", false),
        ("wrong_size", false),
        ("damaged", true),
        ("wrong_item", true),
        ("not_as_described", true),
    ] {
        assert_eq!(
            ReturnReason::parse(reason).map(ReturnReason::needs_a_person),
            Some(person),
            "{reason}"
        );
    }
}

#[test]
fn a_later_turns_history_holds_no_label_link() {
    let begun = StartedReturn {
        return_id: "ret_1".into(),
        label_url: "https://labels.example/l/ret_1?sig=x".into(),
        refund_cents: 1250,
        expires_at: "2026-12-20T00:00:00Z".into(),
    };
    // As replies were stored while the link stood in the text.
    let reply = format!(
        "Done.\n\nYour return label: {} (use it by {}).",
        begun.label_url, begun.expires_at
    );
    let seen = without_label_links(&reply);
    assert!(!seen.contains("labels.example"), "{seen}");
    assert!(
        seen.contains("Your return label: [the link, shown to the customer only] (use it by"),
        "{seen}"
    );
    assert_eq!(without_label_links("no label here"), "no label here");
}
