//! Contract 26's yes over the conversation store itself (the memory one,
//! which keeps the proposals as DynamoDB's header does: the lease takes
//! them for its scope, the append writes back only what the turn
//! proposed, a person's words end them). Whatever the model calls, the
//! customer writes, a person says between, and whichever append fails:
//! nothing is written unless the customer's very next message after the
//! reply that showed exactly it is a yes, and no proposal writes twice.

use std::time::Duration;

use proptest::prelude::*;

use crate::confirm::{Confirmation, ProposalStep, WriteKind};
use crate::conversation::{ConversationId, Exchange};
use crate::doubles::{RecordingRefunds, ScriptedModel, Step, any_order, shipped_help_centre};
use crate::ledger::memory::MemoryLedger;
use crate::ledger::{Begun, ConversationLease, ConversationStore, NewExchange, WritesAppend};
use crate::orders::address::{self as address_tool, AddressArguments};
use crate::orders::memory::MemoryOrders;
use crate::orders::{OrderStatus, ShipTo};
use crate::refund::message::CustomerMessage;
use crate::refund::{Attempt, RefundScope, WriterMark};
use crate::turn::{AddressTurn, Ports, Turn};

const CUSTOMER: &str = "user-7";
const WITHIN: Duration = Duration::from_secs(30 * 60);
const YESES: &[&str] = &["yes", "Yes please!", "oui, merci", "Correct."];
const NOT_YESES: &[&str] = &[
    "No, do not change it",
    "Yes, one more question: when will my refund arrive?",
    "Yes but the postcode is wrong",
    "when will it arrive",
];

fn args(order: &str, line1: &str) -> String {
    serde_json::json!({"order_id": order, "name": "Ada Lovelace", "line1": line1, "line2": "",
                       "postcode": "N1 7AA", "city": "London", "country": "GB"})
    .to_string()
}

fn orders() -> MemoryOrders {
    let mut order = any_order("A-1004", CUSTOMER);
    order.status = OrderStatus::Placed;
    order.delivered_at = None;
    order.delivered_at_ms = None;
    order.ship_to = ShipTo {
        name: "Old Name".into(),
        line1: "1 Old Road".into(),
        city: "Oldtown".into(),
        postcode: "OL1 1DD".into(),
        country: "GB".into(),
    };
    MemoryOrders::new([order])
}

#[derive(Debug, Clone)]
enum Round {
    /// The customer writes; the model calls the address tool with each of
    /// `calls` (two of a kind: both cleared); the turn's append may fail.
    Customer {
        message: &'static str,
        calls: Vec<usize>,
        append_fails: bool,
    },
    /// A person replies between the customer's messages.
    Person,
}

fn rounds() -> impl Strategy<Value = Vec<Round>> {
    let message = prop_oneof![
        3 => prop::sample::select(YESES),
        2 => prop::sample::select(NOT_YESES),
    ];
    let customer = (
        message,
        prop::collection::vec(0usize..2, 0..3),
        prop::bool::weighted(0.35),
    )
        .prop_map(|(message, calls, append_fails)| Round::Customer {
            message,
            calls,
            append_fails,
        });
    prop::collection::vec(prop_oneof![6 => customer, 1 => Just(Round::Person)], 1..9)
}

/// A turn's exchange as the intake appends it, with what becomes of the proposals.
fn exchange_of(message: &str, scope: RefundScope, steps: crate::confirm::ProposalSteps) -> NewExchange {
    NewExchange {
        exchange: Exchange::of_turn(&[crate::chat::Message::User(message.into())], Some("Done.")),
        status: 200,
        scope,
        marked: true,
        refund_recorded: false,
        awaiting_approval: false,
        handoff: None,
        tokens: None,
        key: None,
        router: None,
        writes: WritesAppend {
            steps,
            ..WritesAppend::default()
        },
        orders: Vec::new(),
        verifying: false,
        from_visitor: false,
        label: None,
        handoff_due_at_ms: None,
        told: None,
    }
}

/// One customer turn on the store: the lease (which takes the proposals),
/// the turn, and its append. Returns what the turn proposed, if anything.
async fn customer_turn(
    store: &MemoryLedger,
    orders: &MemoryOrders,
    id: &ConversationId,
    n: usize,
    now_ms: u64,
    (message, calls, append_fails): (&str, &[String], bool),
) -> Option<crate::confirm::Proposal> {
    let scope = RefundScope::for_request(CUSTOMER, format!("req-{n}"));
    let lease = ConversationLease {
        id: id.clone(),
        customer: CUSTOMER.into(),
        writer: WriterMark::fixed(format!("req-{n}/w")),
        // Ends before the next message: a failed append's lease is no obstacle.
        lease_until_ms: now_ms + 1,
        scope: scope.record_id(),
    };
    let Ok(Begun::Held(held)) = store.begin(&lease, false, now_ms).await else {
        panic!("the conversation is held");
    };
    let yes = crate::handoff::screen::YesPhrases::default();
    let steps: Vec<Step> = calls
        .iter()
        .enumerate()
        .map(|(i, raw)| Step::tools(&[(format!("c{i}").as_str(), address_tool::TOOL_NAME, raw.as_str())]))
        .chain([Step::text("Done.")])
        .collect();
    let model = ScriptedModel::new(steps);
    let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
    let tools = Ports {
        refunds: &refunds,
        orders,
        help: shipped_help_centre(),
    };
    let text = CustomerMessage::new(message);
    let attempt = Attempt {
        scope: scope.clone(),
        writer: lease.writer.clone(),
        conversation: Some(id.as_str().to_owned()),
        day_owner: None,
    };
    let mut turn = Turn::new(&model, tools, Duration::from_secs(2), attempt, Vec::new(), &text)
        .address(AddressTurn {
            offered: true,
            countries: None,
        })
        .confirmation(Confirmation {
            waiting: held.proposals.clone(),
            said_yes: yes.says_yes(message),
            confirm_within: WITHIN,
            now_ms,
        });
    let _ = turn.run().await;
    let proposal_steps = turn.stats().proposal_steps.clone();
    let proposed = match proposal_steps.get(WriteKind::ADDRESS) {
        ProposalStep::Set(proposal) => Some(proposal),
        ProposalStep::Keep | ProposalStep::Clear => None,
    };
    store.fail_appends(append_fails);
    let new = exchange_of(message, scope, proposal_steps);
    let appended = store.append(&lease, &held, &new, now_ms).await;
    store.fail_appends(false);
    assert_eq!(appended.is_err(), append_fails);
    // The customer reads the reply whether or not its append landed.
    proposed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_write_unless_the_very_next_message_is_a_yes_to_what_was_read(rounds in rounds()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let candidates = [args("A-1004", "12 Byron Road"), args("A-1004", "13 Byron Road")];
        let orders = orders();
        let store = MemoryLedger::new();
        let id = ConversationId::generate().unwrap();
        runtime.block_on(async {
            let lease = ConversationLease {
                id: id.clone(),
                customer: CUSTOMER.into(),
                writer: WriterMark::fixed("setup/w"),
                lease_until_ms: 1,
                scope: "setup".into(),
            };
            let Ok(Begun::Held(held)) = store.begin(&lease, true, 0).await else { panic!("created") };
            let new = exchange_of("hello", RefundScope::for_request(CUSTOMER, "setup"), Default::default());
            store.append(&lease, &held, &new, 0).await.unwrap();
        });
        // What the customer last read: the proposal a reply showed, and
        // whether anything (a person's words) came after that reply.
        let mut read: Option<crate::confirm::Proposal> = None;
        let mut written: Vec<crate::confirm::Proposal> = Vec::new();
        let yes = crate::handoff::screen::YesPhrases::default();
        for (n, round) in rounds.iter().enumerate() {
            let now = (n as u64 + 1) * 60_000;
            match round {
                Round::Person => {
                    store.person_replies(id.as_str(), "would you rather we keep it at the depot?", now);
                    read = None;
                }
                Round::Customer { message, calls, append_fails } => {
                    let calls: Vec<String> = calls.iter().map(|&i| candidates[i].clone()).collect();
                    let before = orders.writes().len();
                    let proposed = runtime.block_on(
                        customer_turn(&store, &orders, &id, n, now, (message, &calls, *append_fails)),
                    );
                    let after = orders.writes();
                    prop_assert!(after.len() - before <= 1);
                    for (order_id, address) in &after[before..] {
                        let hash = AddressArguments { order_id: order_id.clone(), address: address.clone() }.hash();
                        let shown = read.filter(|p| p.hash == hash);
                        prop_assert!(shown.is_some(), "a write of what the customer's last reply did not show");
                        prop_assert!(yes.says_yes(message), "a write after {message:?}");
                        let shown = shown.unwrap();
                        prop_assert!(!written.contains(&shown), "a proposal written twice");
                        written.push(shown);
                    }
                    read = proposed;
                }
            }
        }
    }
}
