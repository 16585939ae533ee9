//! The turn with the order system (contract 16): `get_order` and the refund
//! checks against a memory order system, through the real "decide, record,
//! then pay" on the memory ledger, so what reaches payments is what the
//! function would send.

use std::time::Duration;

use crate::chat::Message;
use crate::config::DEFAULT_LIMITS;
use crate::doubles::{RecordingPayments, ScriptedModel, Step};
use crate::ledger::memory::MemoryLedger;
use crate::orders::memory::MemoryOrders;
use crate::orders::{Item, Order, OrderStatus, ShipTo};
use crate::record_then_pay::RecordedRefunds;
use crate::refund::message::CustomerMessage;
use crate::refund::money::AmountCents;
use crate::refund::tool::TOOL_NAME;
use crate::refund::{Attempt, PaymentOutcome, Receipt, RefundScope, WriterMark};
use crate::turn::{Ports, Turn, TurnStats};

const CUSTOMER: &str = "user-7";
const DAY_MS: u64 = 86_400_000;

fn order(order_id: &str, customer: &str, status: OrderStatus, delivered_days_ago: Option<u64>) -> Order {
    let now = crate::clock::now_ms();
    Order {
        order_id: order_id.into(),
        customer_id: customer.into(),
        email: None,
        status,
        placed_at: crate::clock::rfc3339(now - 60 * DAY_MS),
        placed_at_ms: now - 60 * DAY_MS,
        delivered_at: delivered_days_ago.map(|days| crate::clock::rfc3339(now - days * DAY_MS)),
        delivered_at_ms: delivered_days_ago.map(|days| now - days * DAY_MS),
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

fn shop() -> MemoryOrders {
    MemoryOrders::new([
        order("A-1", CUSTOMER, OrderStatus::Delivered, Some(2)),
        order("B-1", "someone-else", OrderStatus::Delivered, Some(2)),
        order("E-1", CUSTOMER, OrderStatus::Shipped, None),
        order("F-1", CUSTOMER, OrderStatus::Delivered, Some(45)),
    ])
}

fn paid() -> PaymentOutcome {
    PaymentOutcome::Executed(Receipt {
        refund_id: "rf_1".into(),
        status: "succeeded".into(),
        amount_cents: AmountCents::new(1250),
    })
}

struct Run {
    stats: TurnStats,
    told: Vec<String>,
    paid: Vec<(String, u64)>,
    ledger: MemoryLedger,
}

async fn run(orders: &MemoryOrders, steps: Vec<Step>) -> Run {
    let model = ScriptedModel::new(steps);
    let ledger = MemoryLedger::new();
    let refunds = RecordedRefunds::new(ledger.clone(), RecordingPayments::answering(paid()), DEFAULT_LIMITS);
    let context = Attempt {
        scope: RefundScope::for_request(CUSTOMER, "req-1"),
        writer: WriterMark::fixed("req-1/w"),
        conversation: None,
        day_owner: None,
    };
    let message = CustomerMessage::new("about my order");
    let tools = Ports {
        refunds: &refunds,
        orders,
        help: crate::doubles::shipped_help_centre(),
    };
    let mut turn = Turn::new(&model, tools, Duration::ZERO, context, Vec::new(), &message);
    turn.run().await.expect("a reply");
    let told = turn
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    Run {
        stats: turn.stats().clone(),
        told,
        paid: refunds
            .payments()
            .requests()
            .iter()
            .map(|r| (r.order_id.clone(), r.amount.cents()))
            .collect(),
        ledger,
    }
}

fn get_order(id: &str, order_id: &str) -> (String, String, String) {
    (id.into(), "get_order".into(), format!(r#"{{"order_id":"{order_id}"}}"#))
}

fn refund(id: &str, order_id: &str, cents: u64) -> (String, String, String) {
    (
        id.into(),
        TOOL_NAME.into(),
        format!(r#"{{"order_id":"{order_id}","amount_cents":{cents}}}"#),
    )
}

fn calls(calls: &[(String, String, String)]) -> Step {
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    Step::tools(&borrowed)
}

#[tokio::test]
async fn get_order_reads_as_the_verified_customer_shows_no_address_and_stops_at_three_reads() {
    let orders = shop();
    let run = run(
        &orders,
        vec![
            calls(&[get_order("g1", "A-1"), get_order("g2", "B-1")]),
            calls(&[get_order("g3", "A-1"), get_order("g4", "A-1")]),
            Step::text("It was delivered two days ago."),
        ],
    )
    .await;

    assert_eq!(orders.reads(), 3, "a 4th lookup never reaches the order system");
    assert_eq!(run.stats.order_reads, 3);
    let found: serde_json::Value = serde_json::from_str(&run.told[0]).unwrap();
    assert_eq!(found["status"], "delivered");
    assert_eq!(found["refundable_cents"], 4000);
    assert_eq!(found["ship_to"], "address ending in 002");
    assert_eq!(
        run.told[1], r#"{"error":"no order B-1 for this customer"}"#,
        "another customer's order is not there"
    );
    assert!(run.told[3].contains("at most 3 order lookups"), "{}", run.told[3]);
    for told in &run.told {
        for personal in ["Ada Quokka", "Zanzibar", "Lyon", "69002"] {
            assert!(!told.contains(personal), "{personal} reached the model: {told}");
        }
    }
    assert!(run.paid.is_empty());
}

#[tokio::test]
async fn an_order_not_found_or_more_than_refundable_moves_nothing_and_leaves_the_latch_open() {
    let orders = shop();
    let run = run(
        &orders,
        vec![
            calls(&[refund("c1", "B-1", 1250)]),
            calls(&[refund("c2", "A-1", 4001)]),
            calls(&[refund("c3", "A-1", 1250)]),
            Step::text("Done."),
        ],
    )
    .await;

    assert_eq!(run.told[0], r#"{"error":"no order B-1 for this customer"}"#);
    assert!(run.told[1].contains("only 40.00 remains refundable"), "{}", run.told[1]);
    assert!(run.told[2].contains("rf_1"), "{}", run.told[2]);
    assert_eq!(
        run.paid,
        vec![("A-1".to_owned(), 1250)],
        "only the refund the order allows"
    );
    assert_eq!(run.ledger.records().len(), 1, "the refusals wrote no record");
    assert_eq!(run.stats.second_refunds_refused, 0);
    assert_eq!(
        (run.stats.refund_checks, orders.reads()),
        (3, 3),
        "each check read afresh"
    );
}

#[tokio::test]
async fn a_fourth_refund_check_is_rule_6_and_waits_for_a_person() {
    let orders = shop();
    let run = run(
        &orders,
        vec![
            calls(&[refund("c1", "B-1", 100), refund("c2", "X-9", 100)]),
            calls(&[refund("c3", "B-2", 100), refund("c4", "A-1", 100)]),
            Step::text("A person will look at it."),
        ],
    )
    .await;

    assert_eq!(orders.reads(), 3, "the 4th check is not read");
    assert!(run.told[3].contains("pending_approval"), "{}", run.told[3]);
    assert!(run.told[3].contains("order_unverified"), "{}", run.told[3]);
    assert!(run.paid.is_empty(), "never paid on an order code did not read");
    let records = run.ledger.records();
    assert_eq!(records[0].reasons, ["order_unverified"]);
    assert_eq!(records[0].order, None);
}

#[tokio::test]
async fn rules_4_to_6_send_the_refund_to_a_person_with_the_orders_facts_on_the_record() {
    for (order_id, down, reasons) in [
        ("E-1", false, vec!["not_delivered"]),
        ("F-1", false, vec!["outside_refund_window"]),
        ("A-1", true, vec!["order_unverified"]),
    ] {
        let orders = shop();
        orders.go_down(down);
        let run = run(
            &orders,
            vec![
                calls(&[refund("c1", order_id, 1250)]),
                Step::text("A person will review it."),
            ],
        )
        .await;

        assert!(run.paid.is_empty(), "{order_id}: nothing paid");
        assert!(run.told[0].contains("pending_approval"), "{order_id}: {}", run.told[0]);
        let record = &run.ledger.records()[0];
        assert_eq!(record.reasons, reasons, "{order_id}");
        match (down, &record.order) {
            (true, None) => {}
            (false, Some(facts)) => {
                assert_eq!((facts.paid.cents(), facts.refunded.cents()), (4500, 500), "{order_id}");
                assert_eq!(facts.currency, "EUR");
            }
            other => panic!("{order_id}: {other:?}"),
        }
    }
}

/// Contract 8's rule 7, through the whole money path: a return started with
/// the customer's yes, then in the same turn a refund of the same order (a
/// model that "also refunds it today"). Before rule 7 the refund was paid at
/// once, and the order system paid the return again when the parcel came.
#[tokio::test]
async fn a_refund_beside_a_return_started_in_the_same_turn_waits_for_a_person_and_pays_nothing() {
    use crate::confirm::{Confirmation, Proposal, Proposals, WriteKind};
    use crate::orders::returns::TOOL_NAME as START_RETURN;
    use crate::turn::ReturnTurn;

    let orders = MemoryOrders::new([order("A-1", CUSTOMER, OrderStatus::Delivered, Some(3))]);
    let ret = r#"{"order_id":"A-1","items":[{"name":"Mug","quantity":1}],"reason":"changed_mind"}"#;
    let refund = r#"{"order_id":"A-1","amount_cents":1500}"#;
    // The return was proposed in the turn before; this message is the yes.
    let hash = crate::orders::returns::parse_arguments(ret).expect("valid").hash();
    let now = crate::clock::now_ms();
    let waiting = Proposals::default().with(
        WriteKind::RETURN,
        Proposal::new(hash, now - 60_000, Duration::from_secs(1800)),
    );
    let refunds = RecordedRefunds::new(
        MemoryLedger::new(),
        RecordingPayments::answering(paid()),
        DEFAULT_LIMITS,
    );
    let model = ScriptedModel::new(vec![
        Step::tools(&[("c0", START_RETURN, ret)]),
        Step::tools(&[("c1", TOOL_NAME, refund)]),
        Step::text("Done."),
    ]);
    let tools = Ports {
        refunds: &refunds,
        orders: &orders,
        help: crate::doubles::shipped_help_centre(),
    };
    let mut turn = Turn::new(
        &model,
        tools,
        Duration::from_secs(2),
        Attempt {
            scope: RefundScope::for_request(CUSTOMER, "req-yes"),
            writer: WriterMark::fixed("req-yes/w"),
            conversation: Some("c_0123456789abcdef0123456789abcdef".into()),
            day_owner: None,
        },
        Vec::new(),
        &CustomerMessage::new("yes"),
    )
    .returns(ReturnTurn {
        offered: true,
        window_days: 30,
        ..ReturnTurn::default()
    })
    .confirmation(Confirmation {
        waiting,
        said_yes: true,
        confirm_within: Duration::from_secs(1800),
        now_ms: now,
    });
    turn.run().await.expect("the turn answers");
    assert_eq!(orders.returns().len(), 1, "the return started");
    assert!(
        refunds.payments().requests().is_empty(),
        "and no refund was paid beside it"
    );
    let told: Vec<&str> = turn
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    let told: serde_json::Value = serde_json::from_str(told[1]).expect("json");
    assert_eq!(told["status"], "pending_approval", "{told}");
    assert_eq!(told["reasons"], serde_json::json!(["return_open"]), "{told}");
}
