//! A third write, for the tests only (never shipped): cancelling an order
//! that has not shipped. It is here to show what adding a write takes, one
//! file and its line in the `tools!` list, and that the confirmation rules
//! hold for any write, not just the two the agent has: its property test
//! is the address's, over this write.
//!
//! It writes to no port: a cancellation is kept in this thread's list, with
//! its key, so a test reads what was written and how often.

use std::cell::{Cell, RefCell};
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Value, json};

use super::write::{Refused, Write, Written};
use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::{ProposalStep, WriteKind};
use crate::orders::{Order, OrderStatus, OrderSystem};
use crate::refund::RefundGateway;
use crate::refund::tool::SchemaFailure;

const TOOL_NAME: &str = "cancel_order";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({"type": "object", "properties": {"order_id": {"type": "string"}},
           "required": ["order_id"], "additionalProperties": false})
});

pub(super) const DECLARED: Declared = Declared {
    name: TOOL_NAME,
    description: "Cancel one of the customer's orders that has not shipped.",
    parameters: || &PARAMETERS,
};
pub(super) const STEP: Step = Step::Order;
pub(super) const KIND: Option<WriteKind> = Some(CANCEL);
const CANCEL: WriteKind = WriteKind::new("cancel", "a cancellation", b"cancel\0");

thread_local! {
    /// Offered in this thread's turns (a test switches it on).
    static OFFERED: Cell<bool> = const { Cell::new(false) };
    /// What was cancelled in this thread: (order, key).
    static CANCELLED: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    OFFERED.get() && !session.visitor
}

pub(super) async fn carry_out<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &str,
) -> String {
    super::write::carry_out::<CancelOrder, G, O>(session, arguments).await
}

struct CancelOrder;

impl Write for CancelOrder {
    type Arguments = String;
    type Checked = ();
    const KIND: WriteKind = CANCEL;
    const TOOL: &'static str = TOOL_NAME;

    fn parse(raw: &str) -> Result<String, SchemaFailure> {
        let value: Value = serde_json::from_str(raw).map_err(|_| SchemaFailure::NotJson)?;
        value["order_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| SchemaFailure::invalid_field(TOOL_NAME, "order_id"))
    }

    fn order_id(order_id: &String) -> &str {
        order_id
    }

    fn hash(order_id: &String) -> [u8; 32] {
        crate::confirm::hash_of([order_id.as_str()])
    }

    fn one_per_order() -> Value {
        json!({"error": "one cancellation per order in an answer"})
    }

    fn not_found(order_id: &str) -> Value {
        json!({"error": format!("no order {order_id} of this customer")})
    }

    fn unavailable() -> Value {
        json!({"error": "the order system did not answer"})
    }

    async fn check<G: RefundGateway, O: OrderSystem>(
        _: &mut Session<'_, G, O>,
        order: &Order,
        _: &String,
    ) -> Result<(), Refused> {
        match order.status {
            OrderStatus::Placed => Ok(()),
            _ => Err((json!({"error": "the order has shipped"}), "shipped")),
        }
    }

    fn proposed(order_id: &String, _: &()) -> Value {
        json!({"status": "needs_confirmation", "order_id": order_id})
    }

    fn confirm_line(order_id: &String, _: &()) -> String {
        format!("To cancel order {order_id}, answer yes.")
    }

    async fn write<G: RefundGateway, O: OrderSystem>(
        _: &mut Session<'_, G, O>,
        _: &Order,
        order_id: &String,
        _: &(),
        key: &str,
    ) -> Written {
        CANCELLED.with_borrow_mut(|cancelled| cancelled.push((order_id.clone(), key.to_owned())));
        Written {
            result: json!({"status": "cancelled", "order_id": order_id}),
            outcome: "cancelled",
            step: ProposalStep::Clear,
            handoff: None,
            kept: None,
        }
    }

    fn record<G, O>(_: &mut Session<'_, G, O>, _: &String, outcome: &'static str, _: Option<String>, _: Duration) {
        tracing::info!(event = "tool_call", tool = TOOL_NAME, validation = "ok", cancel_outcome = outcome);
    }
}

mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::{CANCEL, CANCELLED, OFFERED, TOOL_NAME};
    use crate::confirm::{Confirmation, Proposal, ProposalStep, ProposalSteps, Proposals};
    use crate::doubles::{RecordingRefunds, any_order, shipped_help_centre};
    use crate::handoff::screen::YesPhrases;
    use crate::orders::OrderStatus;
    use crate::orders::memory::MemoryOrders;
    use crate::refund::message::CustomerMessage;
    use crate::refund::{Attempt, RefundScope, WriterMark};
    use crate::tools::{Ports, Session, TurnStats};

    const MINUTES_30: Duration = Duration::from_secs(30 * 60);
    const MESSAGES: &[&str] = &["yes", "Sí", "ja bitte", "No, keep it", "Yes but not that one", "when will it arrive"];

    fn orders() -> MemoryOrders {
        let mut shipped = any_order("E-5001", "user-7");
        shipped.status = OrderStatus::Shipped;
        let mut placed = any_order("A-1004", "user-7");
        placed.status = OrderStatus::Placed;
        let mut other = any_order("A-1005", "user-7");
        other.status = OrderStatus::Placed;
        MemoryOrders::new([placed, other, shipped])
    }

    /// One turn's calls to cancel each of `calls`, as the turn makes them
    /// ([`crate::tools::run`] on the turn's session).
    async fn turn(orders: &MemoryOrders, calls: &[&str], waiting: Option<Proposal>, said_yes: bool, now_ms: u64) -> TurnStats {
        OFFERED.set(true);
        let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
        let ports = Ports {
            refunds: &refunds,
            orders,
            help: shipped_help_centre(),
        };
        let mut proposals = Proposals::default();
        proposals.set(CANCEL, waiting);
        let context = Attempt {
            scope: RefundScope::for_request("user-7", "req-1"),
            writer: WriterMark::fixed("req-1/w"),
            conversation: Some("c_0123456789abcdef0123456789abcdef".into()),
            day_owner: None,
        };
        let mut session = Session::new(ports, context, &CustomerMessage::new("yes"));
        // As the turn begins: only the next message may confirm.
        session.stats.proposal_steps = ProposalSteps::clearing();
        session.confirmation = Confirmation {
            waiting: proposals,
            said_yes,
            confirm_within: MINUTES_30,
            now_ms,
        };
        for order in calls {
            let arguments = serde_json::json!({"order_id": order}).to_string();
            let told = crate::tools::run(&mut session, TOOL_NAME, &arguments).await;
            assert!(!told.contains("unknown tool"), "the write is offered: {told}");
        }
        session.stats
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The address's rules, over this write: every cancellation names
        /// a proposal stored by the turn just before, in a turn whose
        /// customer message is a yes, and no proposal is written twice.
        #[test]
        fn no_write_without_a_stored_proposal_and_the_next_message_a_yes(
            rounds in prop::collection::vec(
                (prop::sample::select(MESSAGES), prop::collection::vec(0usize..3, 0..3)),
                1..7,
            )
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
            let yes = YesPhrases::default();
            let candidates = ["A-1004", "A-1005", "E-5001"];
            let orders = orders();
            CANCELLED.with_borrow_mut(Vec::clear);
            let mut waiting: Option<(Proposal, usize)> = None;
            let mut written: Vec<Proposal> = Vec::new();
            for (n, (message, calls)) in rounds.iter().enumerate() {
                let now = (n as u64 + 1) * 60_000;
                let said_yes = yes.says_yes(message);
                let calls: Vec<&str> = calls.iter().map(|&i| candidates[i]).collect();
                let before = CANCELLED.with_borrow(Vec::len);
                let stats = runtime.block_on(turn(&orders, &calls, waiting.map(|(p, _)| p), said_yes, now));
                let after = CANCELLED.with_borrow(Vec::clone);
                for (order_id, _) in &after[before..] {
                    let hash = crate::confirm::hash_of([order_id.as_str()]);
                    let proposal = waiting.filter(|(p, _)| p.hash == hash);
                    prop_assert!(proposal.is_some(), "a write without a stored proposal naming it");
                    let (proposal, stored_in) = proposal.unwrap();
                    prop_assert_eq!(stored_in + 1, n, "a write in a turn after the next one");
                    prop_assert!(said_yes, "a write in a turn whose customer did not say yes: {}", message);
                    prop_assert!(!written.contains(&proposal), "a proposal written twice");
                    written.push(proposal);
                }
                prop_assert!(after.len() - before <= 1);
                match stats.proposal_steps.get(CANCEL) {
                    ProposalStep::Keep => {}
                    ProposalStep::Set(p) => waiting = Some((p, n)),
                    ProposalStep::Clear => waiting = None,
                }
            }
        }
    }

    /// The walk end to end: a proposal with code's own line, then the yes
    /// of the next message writes once, with the proposal's key.
    #[tokio::test]
    async fn a_proposal_then_the_next_yes_cancels_once_with_its_key() {
        CANCELLED.with_borrow_mut(Vec::clear);
        let orders = orders();
        let proposed = turn(&orders, &["A-1004"], None, false, 1_000).await;
        let ProposalStep::Set(proposal) = proposed.proposal_steps.get(CANCEL) else {
            panic!("a proposal: {proposed:?}");
        };
        assert_eq!(proposed.code_lines, vec![(CANCEL, "To cancel order A-1004, answer yes.".to_owned())]);
        assert!(CANCELLED.with_borrow(Vec::is_empty));
        let confirmed = turn(&orders, &["A-1004"], Some(proposal), true, 60_000).await;
        assert_eq!(confirmed.proposal_steps.get(CANCEL), ProposalStep::Clear);
        let cancelled = CANCELLED.with_borrow(Vec::clone);
        let key = crate::confirm::write_key(CANCEL, "c_0123456789abcdef0123456789abcdef", &proposal);
        assert_eq!(cancelled, vec![("A-1004".to_owned(), key)]);
    }
}
