//! Contract 28 in the turn, and the one confirmation mechanism both writes
//! go through: a return is checked against the order read afresh, a first
//! call proposes and writes nothing, only the customer's next message being
//! exactly a yes, with exactly the proposed arguments, starts it, once; two
//! proposals waiting and a bare yes write neither; and whatever the model
//! calls and the customer writes, every write (an address or a return)
//! names a proposal stored the turn before, in a turn whose customer said
//! yes, at most once.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::confirm::{Proposal, ProposalStep, Proposals, WriteKind};
use crate::doubles::{RecordingRefunds, ScriptedModel, Step, any_order, shipped_help_centre};
use crate::handoff::Reason;
use crate::orders::OrderLookup;
use crate::orders::address::{self as address_tool, AddressArguments, AddressWrite};
use crate::orders::memory::MemoryOrders;
use crate::orders::returns::{self as return_tool, ReturnArguments, ReturnWrite};
use crate::orders::{Item, OrderStatus};
use crate::refund::policy::OrderFacts;
use crate::refund::tool::TOOL_NAME;
use crate::refund::{RefundScope, WriterMark};

const CUSTOMER: &str = "user-7";
const MINUTES_30: Duration = Duration::from_secs(30 * 60);
const DAY_MS: u64 = 86_400_000;
/// The turns' clock: well after every order's delivery.
const NOW: u64 = 400 * DAY_MS;
const LABELS: &str = "https://labels.example";

fn ret(order: &str, quantity: u32, reason: &str) -> String {
    json!({"order_id": order, "items": [{"name": "Blue mug", "quantity": quantity}], "reason": reason}).to_string()
}

fn address(order: &str) -> String {
    json!({"order_id": order, "name": "Ada Lovelace", "line1": "12 Byron Road", "line2": "",
           "postcode": "N1 7AA", "city": "London", "country": "GB"})
    .to_string()
}

fn order(order_id: &str, status: OrderStatus, delivered_days_ago: u64) -> crate::orders::Order {
    let mut order = any_order(order_id, CUSTOMER);
    order.status = status;
    order.delivered_at_ms = (status == OrderStatus::Delivered).then_some(NOW - delivered_days_ago * DAY_MS);
    order.paid_cents = 2500;
    order.items = vec![Item {
        name: "Blue mug".into(),
        quantity: 2,
        unit_price_cents: 1250,
        returned_quantity: 0,
    }];
    order
}

fn orders() -> MemoryOrders {
    let mut open = order("R-8001", OrderStatus::Delivered, 3);
    open.has_open_return = true;
    MemoryOrders::new([
        order("A-1002", OrderStatus::Delivered, 3),
        order("O-1", OrderStatus::Delivered, 45),
        open,
        order("A-1004", OrderStatus::Placed, 0),
    ])
}

fn context() -> Attempt {
    Attempt {
        scope: RefundScope::for_request(CUSTOMER, "req-1"),
        writer: WriterMark::fixed("req-1/w"),
        conversation: Some("c_0123456789abcdef0123456789abcdef".into()),
        day_owner: None,
    }
}

/// Both writes offered, with the conversation's `waiting` proposals.
fn offered(waiting: Proposals, said_yes: bool, now_ms: u64) -> Confirmation {
    Confirmation {
        waiting,
        said_yes,
        confirm_within: MINUTES_30,
        now_ms,
    }
}

struct Ran {
    stats: TurnStats,
    results: Vec<String>,
    handoff: Option<Reason>,
}

/// One turn whose model makes each of `calls` (tool, arguments), then answers.
async fn turn(orders: &MemoryOrders, calls: &[(&str, String)], confirmation: Confirmation) -> Ran {
    let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
    turn_with(orders, &refunds, calls, confirmation, Vec::new()).await
}

/// [`turn`] with `refunds` for the refund gateway, and `started_before` the
/// orders earlier turns of the conversation started a return of.
async fn turn_with<G: RefundGateway>(
    orders: &MemoryOrders,
    refunds: &G,
    calls: &[(&str, String)],
    confirmation: Confirmation,
    started_before: Vec<String>,
) -> Ran {
    let named: Vec<(String, &str, &str)> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, raw))| (format!("c{i}"), *tool, raw.as_str()))
        .collect();
    let steps: Vec<Step> = named
        .iter()
        .map(|(id, name, raw)| Step::tools(&[(id.as_str(), *name, *raw)]))
        .chain([Step::text("Done.")])
        .collect();
    let model = ScriptedModel::new(steps);
    let tools = Ports {
        refunds,
        orders,
        help: shipped_help_centre(),
    };
    let message = CustomerMessage::new("yes");
    let mut turn = Turn::new(&model, tools, Duration::from_secs(2), context(), Vec::new(), &message)
        .with_handoff("h_1".into())
        .address(AddressTurn {
            offered: true,
            countries: None,
        })
        .returns(ReturnTurn {
            offered: true,
            window_days: 30,
            label_origins: vec![LABELS.into()],
            zone: None,
            started_before,
        })
        .confirmation(confirmation);
    let _ = turn.run().await;
    let results = turn
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    Ran {
        stats: turn.stats().clone(),
        results,
        handoff: turn.handoff().map(|h| h.reason),
    }
}

fn proposed(ran: &Ran, kind: WriteKind) -> Proposal {
    match ran.stats.proposal_steps.get(kind) {
        ProposalStep::Set(proposal) => proposal,
        other => panic!("no {kind:?} proposal: {other:?} {:?}", ran.results),
    }
}

#[tokio::test]
async fn a_first_call_proposes_in_codes_words_and_starts_nothing() {
    let orders = orders();
    let ran = turn(
        &orders,
        &[(return_tool::TOOL_NAME, ret("A-1002", 1, "changed_mind"))],
        offered(Proposals::default(), true, NOW),
    )
    .await;
    let result: serde_json::Value = serde_json::from_str(&ran.results[0]).unwrap();
    assert_eq!(result["status"], "confirm");
    assert_eq!(
        result["summary"],
        "return from order A-1002: 1 × Blue mug, reason: changed my mind"
    );
    assert!(
        orders.returns().is_empty(),
        "a yes in the proposing message starts nothing"
    );
    proposed(&ran, WriteKind::RETURN);
    assert_eq!(
        ran.stats.code_lines,
        [(
            WriteKind::RETURN,
            "To confirm: return from order A-1002: 1 × Blue mug, reason: changed my mind; refund of 12.50 EUR once \
             it arrives. Answer yes to start it; anything else starts nothing."
                .to_owned()
        )]
    );
    assert_eq!(ran.stats.returns[0].outcome, "proposed");
}

#[tokio::test]
async fn the_next_messages_yes_with_the_same_arguments_starts_it_once_with_the_label_apart_from_the_text() {
    let orders = orders();
    let raw = ret("A-1002", 1, "changed_mind");
    let first = turn(
        &orders,
        &[(return_tool::TOOL_NAME, raw.clone())],
        offered(Proposals::default(), false, NOW),
    )
    .await;
    let waiting = Proposals::default().with(WriteKind::RETURN, proposed(&first, WriteKind::RETURN));
    // The model calls twice: the second is refused, one return per order a message.
    let second = turn(
        &orders,
        &[
            (return_tool::TOOL_NAME, raw.clone()),
            (return_tool::TOOL_NAME, raw.clone()),
        ],
        offered(waiting.clone(), true, NOW + 60_000),
    )
    .await;
    assert_eq!(orders.returns().len(), 1);
    let result: serde_json::Value = serde_json::from_str(&second.results[0]).unwrap();
    assert_eq!(result["status"], "started");
    assert_eq!(result["return_id"], "ret_000001");
    assert!(
        !second.results.iter().any(|r| r.contains("labels.example")),
        "{:?}",
        second.results
    );
    assert!(second.results[1].contains("at most one return per order"));
    assert_eq!(second.stats.proposal_steps.get(WriteKind::RETURN), ProposalStep::Clear);
    // Code's line points at the label, which travels apart (contract 28).
    let (kind, line) = &second.stats.code_lines[0];
    assert_eq!(*kind, WriteKind::RETURN);
    assert!(!line.contains("http") && line.contains("label is below"), "{line}");
    assert_eq!(
        second.stats.label.as_ref().map(|label| label.url.as_str()),
        Some("https://labels.example/ret_000001")
    );
    assert_eq!(second.stats.returns[0].return_id.as_deref(), Some("ret_000001"));
    // The same proposal confirmed again (a lost answer): the key starts it once.
    let again = turn(
        &orders,
        &[(return_tool::TOOL_NAME, raw)],
        offered(waiting, true, NOW + 120_000),
    )
    .await;
    assert_eq!(orders.returns().len(), 1, "{:?}", again.results);
}

#[tokio::test]
async fn without_the_yes_or_with_other_arguments_or_expired_it_proposes_again() {
    let raw = ret("A-1002", 1, "changed_mind");
    let proposal = Proposal::new(return_tool::parse_arguments(&raw).unwrap().hash(), NOW, MINUTES_30);
    let waiting = Proposals::default().with(WriteKind::RETURN, proposal);
    for (raw, said_yes, now) in [
        (raw.clone(), false, NOW + 60_000),
        (ret("A-1002", 2, "changed_mind"), true, NOW + 60_000),
        (ret("A-1002", 1, "wrong_size"), true, NOW + 60_000),
        (raw.clone(), true, NOW + MINUTES_30.as_millis() as u64),
    ] {
        let orders = orders();
        let ran = turn(
            &orders,
            &[(return_tool::TOOL_NAME, raw.clone())],
            offered(waiting.clone(), said_yes, now),
        )
        .await;
        assert!(orders.returns().is_empty(), "{raw} {said_yes} {now}");
        assert_ne!(proposed(&ran, WriteKind::RETURN), proposal);
    }
}

#[tokio::test]
async fn every_refused_check_writes_nothing_proposes_nothing_and_says_why() {
    for (raw, outcome, why) in [
        (ret("O-1", 1, "changed_mind"), "outside_window", "more than 30 days ago"),
        (ret("R-8001", 1, "wrong_size"), "return_open", "a return open already"),
        (
            ret("A-1002", 3, "changed_mind"),
            "more_than_holds",
            "2 of it remains returnable",
        ),
        (ret("A-1004", 1, "changed_mind"), "not_delivered", "not delivered"),
        (ret("Z-9", 1, "changed_mind"), "not_found", "no order Z-9"),
        (
            json!({"order_id": "A-1002", "items": [{"name": "Red mug", "quantity": 1}], "reason": "wrong_size"})
                .to_string(),
            "not_on_order",
            "\\\"Blue mug\\\"",
        ),
    ] {
        let orders = orders();
        let ran = turn(
            &orders,
            &[(return_tool::TOOL_NAME, raw.clone())],
            offered(Proposals::default(), true, NOW),
        )
        .await;
        assert_eq!(ran.stats.returns[0].outcome, outcome, "{raw}");
        assert!(ran.results[0].contains(why), "{raw}: {}", ran.results[0]);
        assert!(orders.returns().is_empty());
        // Nothing proposed: what the conversation held is cleared, nothing set.
        assert_eq!(ran.stats.proposal_steps.get(WriteKind::RETURN), ProposalStep::Clear);
        assert!(ran.stats.code_lines.is_empty());
    }
}

#[tokio::test]
async fn a_damaged_wrong_or_misdescribed_item_goes_to_a_person_in_code() {
    for reason in ["damaged", "wrong_item", "not_as_described"] {
        let orders = orders();
        let ran = turn(
            &orders,
            &[(return_tool::TOOL_NAME, ret("A-1002", 1, reason))],
            offered(Proposals::default(), true, NOW),
        )
        .await;
        assert_eq!(ran.handoff, Some(Reason::ReturnNeedsAPerson), "{reason}");
        assert_eq!(ran.stats.returns[0].outcome, "needs_a_person");
        assert!(orders.returns().is_empty() && ran.stats.code_lines.is_empty());
    }
}

#[tokio::test]
async fn an_unknown_outcome_keeps_the_proposal_for_the_person_it_hands_to() {
    let orders = orders();
    let raw = ret("A-1002", 1, "changed_mind");
    let first = turn(
        &orders,
        &[(return_tool::TOOL_NAME, raw.clone())],
        offered(Proposals::default(), false, NOW),
    )
    .await;
    let proposal = proposed(&first, WriteKind::RETURN);
    // The order reads, the write does not answer.
    let down = DownOnWrite(&orders);
    let model = ScriptedModel::new(vec![
        Step::tools(&[("c0", return_tool::TOOL_NAME, &raw)]),
        Step::text("Done."),
    ]);
    let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
    let tools = Ports {
        refunds: &refunds,
        orders: &down,
        help: shipped_help_centre(),
    };
    let mut turn = Turn::new(
        &model,
        tools,
        Duration::from_secs(2),
        context(),
        Vec::new(),
        &CustomerMessage::new("yes"),
    )
    .with_handoff("h_1".into())
    .returns(ReturnTurn {
        offered: true,
        window_days: 30,
        label_origins: Vec::new(),
        ..ReturnTurn::default()
    })
    .confirmation(offered(
        Proposals::default().with(WriteKind::RETURN, proposal),
        true,
        NOW + 1,
    ));
    let _ = turn.run().await;
    assert_eq!(turn.stats().returns[0].outcome, "unknown");
    assert_eq!(turn.stats().proposal_steps.get(WriteKind::RETURN), ProposalStep::Keep);
    assert_eq!(turn.handoff().map(|h| h.reason), Some(Reason::ReturnWriteUnknown));
}

/// The order system reads, and its return write goes unanswered.
struct DownOnWrite<'a>(&'a MemoryOrders);

impl OrderSystem for DownOnWrite<'_> {
    async fn order(&self, order_id: &str, shopper: &orders::Shopper) -> OrderLookup {
        self.0.order(order_id, shopper).await
    }

    async fn change_address(
        &self,
        _: &str,
        _: &orders::Shopper,
        _: &orders::address::Address,
        _: &str,
    ) -> AddressWrite {
        AddressWrite::Unknown(orders::OrdersError::Timeout)
    }

    async fn start_return(&self, _: &str, _: &orders::Shopper, _: &ReturnArguments, _: &str) -> ReturnWrite {
        ReturnWrite::Unknown(orders::OrdersError::Timeout)
    }
}

#[tokio::test]
async fn with_an_address_and_a_return_waiting_a_bare_yes_writes_neither_and_asks_which() {
    let orders = orders();
    let (a, r) = (address("A-1004"), ret("A-1002", 1, "changed_mind"));
    let first = turn(
        &orders,
        &[
            (address_tool::TOOL_NAME, a.clone()),
            (return_tool::TOOL_NAME, r.clone()),
        ],
        offered(Proposals::default(), false, NOW),
    )
    .await;
    assert_eq!(first.stats.code_lines.len(), 2, "both lines for the customer to read");
    let waiting = Proposals::default()
        .with(WriteKind::ADDRESS, proposed(&first, WriteKind::ADDRESS))
        .with(WriteKind::RETURN, proposed(&first, WriteKind::RETURN));
    let yes = turn(
        &orders,
        &[(address_tool::TOOL_NAME, a), (return_tool::TOOL_NAME, r)],
        offered(waiting, true, NOW + 60_000),
    )
    .await;
    assert!(orders.writes().is_empty() && orders.returns().is_empty());
    for result in &yes.results {
        assert!(result.contains("a change of delivery address and a return"), "{result}");
    }
    assert_eq!(yes.stats.proposal_steps.get(WriteKind::ADDRESS), ProposalStep::Clear);
    assert_eq!(yes.stats.proposal_steps.get(WriteKind::RETURN), ProposalStep::Clear);
}

#[tokio::test]
async fn not_offered_it_is_no_tool_and_reads_nothing() {
    let orders = orders();
    let model = ScriptedModel::new(vec![
        Step::tools(&[("c0", return_tool::TOOL_NAME, &ret("A-1002", 1, "changed_mind"))]),
        Step::text("Done."),
    ]);
    let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
    let tools = Ports {
        refunds: &refunds,
        orders: &orders,
        help: shipped_help_centre(),
    };
    let mut turn = Turn::new(
        &model,
        tools,
        Duration::from_secs(2),
        context(),
        Vec::new(),
        &CustomerMessage::new("yes"),
    );
    let _ = turn.run().await;
    assert_eq!(orders.reads(), 0);
    assert!(turn.stats().returns.is_empty());
}

/// What the customer writes in one turn, and what the model calls in it.
#[derive(Debug, Clone)]
struct Round {
    message: &'static str,
    calls: Vec<usize>,
}

const YESES: &[&str] = &["yes", "Yes please!", "oui, merci", "ja bitte", "Correct."];
const NOT_YESES: &[&str] = &[
    "No, do not send it back",
    "Yes, but which one?",
    "Yes but only one mug",
    "Go ahead and refund me instead",
    "please return the mug",
    "and the address?",
];

fn rounds() -> impl Strategy<Value = Vec<Round>> {
    let message = prop_oneof![prop::sample::select(YESES), prop::sample::select(NOT_YESES)];
    prop::collection::vec(
        (message, prop::collection::vec(0usize..6, 0..4)).prop_map(|(message, calls)| Round { message, calls }),
        1..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Whatever the model calls (addresses and returns, mixed) and the
    /// customer writes over a conversation: every write, of either kind,
    /// names a proposal of its kind stored by the turn just before, in a
    /// turn whose customer message is exactly a yes and which began with
    /// that one proposal waiting alone; and no proposal writes twice.
    #[test]
    fn no_write_of_either_kind_without_a_stored_proposal_and_the_next_message_a_yes(rounds in rounds()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let yes = crate::handoff::screen::YesPhrases::default();
        let candidates: [(&str, String); 6] = [
            (address_tool::TOOL_NAME, address("A-1004")),
            (address_tool::TOOL_NAME, json!({"order_id": "A-1004", "name": "Ada", "line1": "1 Other Road", "line2": "",
                "postcode": "N1 7AA", "city": "London", "country": "GB"}).to_string()),
            (return_tool::TOOL_NAME, ret("A-1002", 1, "changed_mind")),
            (return_tool::TOOL_NAME, ret("A-1002", 2, "wrong_size")),
            (return_tool::TOOL_NAME, ret("O-1", 1, "changed_mind")),
            (return_tool::TOOL_NAME, ret("A-1002", 1, "damaged")),
        ];
        let orders = orders();
        // The proposals the conversation holds, each with the round that stored it.
        let mut waiting: [Option<(Proposal, usize)>; 2] = [None, None];
        let mut written: Vec<Proposal> = Vec::new();
        for (n, round) in rounds.iter().enumerate() {
            let now = NOW + (n as u64 + 1) * 60_000;
            let calls: Vec<(&str, String)> = round.calls.iter().map(|&i| candidates[i].clone()).collect();
            let said_yes = yes.says_yes(round.message);
            prop_assert_eq!(said_yes, YESES.contains(&round.message), "{}", round.message);
            let (addresses_before, returns_before) = (orders.writes().len(), orders.returns().len());
            let mut held = Proposals::default();
            for (slot, kind) in [(0, WriteKind::ADDRESS), (1, WriteKind::RETURN)] {
                held.set(kind, waiting[slot].map(|(proposal, _)| proposal));
            }
            let waited_alone = waiting.iter().filter(|w| w.is_some()).count() == 1;
            let ran = runtime.block_on(turn(&orders, &calls, offered(held, said_yes, now)));
            let new_addresses: Vec<[u8; 32]> = orders.writes()[addresses_before..]
                .iter()
                .map(|(order_id, address)| AddressArguments { order_id: order_id.clone(), address: address.clone() }.hash())
                .collect();
            let new_returns: Vec<[u8; 32]> = orders.returns()[returns_before..]
                .iter()
                .map(|(_, arguments)| arguments.hash())
                .collect();
            for (slot, hashes) in [(0, new_addresses), (1, new_returns)] {
                prop_assert!(hashes.len() <= 1, "two writes of one kind in a turn");
                for hash in hashes {
                    let stored = waiting[slot].filter(|(p, _)| p.hash == hash);
                    prop_assert!(stored.is_some(), "a write without a stored proposal naming it");
                    let (proposal, stored_in) = stored.unwrap();
                    prop_assert_eq!(stored_in + 1, n, "a write in a turn after the next one");
                    prop_assert!(said_yes, "a write in a turn whose customer did not say yes: {}", round.message);
                    prop_assert!(waited_alone, "a write while another proposal waited too");
                    prop_assert!(!written.contains(&proposal), "a proposal written twice");
                    written.push(proposal);
                }
            }
            for (slot, kind) in [(0, WriteKind::ADDRESS), (1, WriteKind::RETURN)] {
                match ran.stats.proposal_steps.get(kind) {
                    ProposalStep::Keep => {}
                    ProposalStep::Set(p) => waiting[slot] = Some((p, n)),
                    ProposalStep::Clear => waiting[slot] = None,
                }
            }
        }
    }
}

#[tokio::test]
async fn a_refund_of_an_order_whose_return_is_open_or_started_earlier_in_the_conversation_waits_for_a_person() {
    let orders = orders();
    for (order, started_before) in [("R-8001", vec![]), ("A-1002", vec!["a-1002".to_owned()])] {
        let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
        let refund = format!(r#"{{"order_id":"{order}","amount_cents":100}}"#);
        turn_with(
            &orders,
            &refunds,
            &[(TOOL_NAME, refund)],
            offered(Proposals::default(), false, NOW),
            started_before,
        )
        .await;
        let asked = refunds.requests();
        let OrderFacts::Read(snapshot) = &asked[0].order else {
            panic!("the order was read");
        };
        assert!(snapshot.return_open, "{order}");
        assert_eq!(
            crate::refund::policy::order_reasons(&asked[0].order, Duration::from_secs(30 * 86_400), NOW),
            vec![crate::refund::policy::Reason::ReturnOpen],
            "{order}"
        );
    }
}

#[tokio::test]
async fn a_return_of_an_order_refunded_in_rule_2s_window_goes_to_a_person_and_starts_nothing() {
    let orders = orders();
    let raw = ret("A-1002", 1, "changed_mind");
    for (books, outcome, handoff) in [
        (Some(true), "after_refund", Some(Reason::ReturnAfterRefund)),
        (None, "refunds_unknown", None),
    ] {
        let refunds =
            RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded).with_refunded_recently(books);
        let ran = turn_with(
            &orders,
            &refunds,
            &[(return_tool::TOOL_NAME, raw.clone())],
            offered(Proposals::default(), false, NOW),
            Vec::new(),
        )
        .await;
        assert_eq!(ran.stats.returns[0].outcome, outcome);
        assert_eq!(ran.handoff, handoff);
        assert!(ran.stats.code_lines.is_empty(), "nothing proposed");
        assert_eq!(ran.stats.proposal_steps.get(WriteKind::RETURN), ProposalStep::Clear);
    }
    assert!(orders.returns().is_empty());
}

/// Contract 26, tightened: two proposals of one kind in one turn show the
/// customer no two lines, and neither waits for a bare yes.
#[tokio::test]
async fn two_proposals_of_a_kind_in_one_turn_clear_both_and_the_model_asks_which() {
    let orders = orders();
    let ran = turn(
        &orders,
        &[
            (return_tool::TOOL_NAME, ret("A-1002", 1, "changed_mind")),
            (return_tool::TOOL_NAME, ret("A-1002", 2, "changed_mind")),
        ],
        offered(Proposals::default(), false, NOW),
    )
    .await;
    assert!(ran.stats.code_lines.is_empty(), "{:?}", ran.stats.code_lines);
    assert_eq!(ran.stats.proposal_steps.get(WriteKind::RETURN), ProposalStep::Clear);
    assert!(
        ran.results[1].contains("Ask the customer which one"),
        "{}",
        ran.results[1]
    );
    // The same proposal twice is one line.
    let raw = ret("A-1002", 1, "changed_mind");
    let twice = turn(
        &orders,
        &[(return_tool::TOOL_NAME, raw.clone()), (return_tool::TOOL_NAME, raw)],
        offered(Proposals::default(), false, NOW),
    )
    .await;
    assert_eq!(twice.stats.code_lines.len(), 1);
    proposed(&twice, WriteKind::RETURN);
}
