//! Contract 26 in the turn: the customer's yes is held in code. A first
//! call proposes and writes nothing; only a later turn whose customer
//! message is an explicit yes, calling with exactly the proposed arguments,
//! writes, once; and whatever the model calls and the customer writes, no
//! address is written without a stored proposal and a later yes naming it.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::confirm::{ProposalStep, WriteKind};
use crate::doubles::{RecordingRefunds, ScriptedModel, Step, any_order, shipped_help_centre};
use crate::orders::address::{self as address_tool, AddressArguments};
use crate::orders::memory::MemoryOrders;
use crate::orders::{OrderStatus, ShipTo};
use crate::refund::{RefundScope, WriterMark};

const CUSTOMER: &str = "user-7";
const MINUTES_30: Duration = Duration::from_secs(30 * 60);

fn args(order: &str, line1: &str, country: &str) -> String {
    serde_json::json!({"order_id": order, "name": "Ada Lovelace", "line1": line1, "line2": "",
                       "postcode": "N1 7AA", "city": "London", "country": country})
    .to_string()
}

fn placed(order_id: &str, status: OrderStatus) -> crate::orders::Order {
    let mut order = any_order(order_id, CUSTOMER);
    order.status = status;
    order.delivered_at = None;
    order.delivered_at_ms = None;
    order.ship_to = ShipTo {
        name: "Old Name".into(),
        line1: "1 Old Road".into(),
        city: "Oldtown".into(),
        postcode: "OL1 1DD".into(),
        country: "GB".into(),
    };
    order
}

fn orders() -> MemoryOrders {
    MemoryOrders::new([
        placed("A-1004", OrderStatus::Placed),
        placed("E-5001", OrderStatus::Shipped),
        placed("X-1", OrderStatus::Cancelled),
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

fn proposal_of(raw: &str, at_ms: u64) -> crate::confirm::Proposal {
    crate::confirm::Proposal {
        hash: address_tool::parse_arguments(raw).unwrap().hash(),
        at_ms,
        until_ms: at_ms + MINUTES_30.as_millis() as u64,
    }
}

/// One turn whose model calls the address tool with each of `calls`, then answers.
async fn turn(
    orders: &MemoryOrders,
    calls: &[String],
    (address, confirmation): (AddressTurn, Confirmation),
) -> (TurnStats, Vec<String>, Result<String, TurnError>) {
    let named: Vec<(String, &str, &str)> = calls
        .iter()
        .enumerate()
        .map(|(i, raw)| (format!("c{i}"), address_tool::TOOL_NAME, raw.as_str()))
        .collect();
    let steps: Vec<Step> = named
        .iter()
        .map(|(id, name, raw)| Step::tools(&[(id.as_str(), *name, *raw)]))
        .chain([Step::text("Done.")])
        .collect();
    let model = ScriptedModel::new(steps);
    let refunds = RecordingRefunds::answering(crate::refund::RefundOutcome::Unrecorded);
    let tools = Ports {
        refunds: &refunds,
        orders,
        help: shipped_help_centre(),
    };
    let message = CustomerMessage::new("yes");
    let mut turn = Turn::new(&model, tools, Duration::from_secs(2), context(), Vec::new(), &message)
        .address(address)
        .confirmation(confirmation);
    let result = turn.run().await;
    let results = turn
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    (turn.stats().clone(), results, result)
}

/// The tool offered, with `waiting` the conversation's one address proposal.
fn offered(waiting: Option<crate::confirm::Proposal>, said_yes: bool, now_ms: u64) -> (AddressTurn, Confirmation) {
    let mut proposals = crate::confirm::Proposals::default();
    proposals.set(WriteKind::ADDRESS, waiting);
    (
        AddressTurn {
            offered: true,
            countries: None,
        },
        Confirmation {
            waiting: proposals,
            said_yes,
            confirm_within: MINUTES_30,
            now_ms,
        },
    )
}

#[tokio::test]
async fn a_first_call_proposes_with_codes_summary_and_writes_nothing() {
    let orders = orders();
    let raw = args("A-1004", "12 Byron Road", "GB");
    let (stats, results, _) = turn(&orders, std::slice::from_ref(&raw), offered(None, true, 1_000)).await;
    let result: serde_json::Value = serde_json::from_str(&results[0]).unwrap();
    assert_eq!(result["status"], "confirm");
    assert_eq!(
        result["summary"],
        "order A-1004: deliver to the address ending in 7AA, GB"
    );
    assert!(
        orders.writes().is_empty(),
        "a yes in the same message as the address never writes"
    );
    assert_eq!(
        stats.proposal_steps.get(WriteKind::ADDRESS),
        ProposalStep::Set(proposal_of(&raw, 1_000))
    );
    assert_eq!(stats.addresses[0].outcome, "proposed");
}

#[tokio::test]
async fn a_later_yes_with_exactly_the_proposed_arguments_writes_once() {
    let orders = orders();
    let raw = args("A-1004", "12 Byron Road", "GB");
    let waiting = proposal_of(&raw, 1_000);
    let (stats, results, _) = turn(
        &orders,
        &[raw.clone(), raw.clone()],
        offered(Some(waiting), true, 60_000),
    )
    .await;
    assert_eq!(orders.writes().len(), 1);
    assert_eq!(orders.writes()[0].1.line1, "12 Byron Road");
    let first: serde_json::Value = serde_json::from_str(&results[0]).unwrap();
    assert_eq!(first["status"], "changed");
    assert!(
        results[1].contains("at most one change of address per order"),
        "{}",
        results[1]
    );
    assert_eq!(stats.proposal_steps.get(WriteKind::ADDRESS), ProposalStep::Clear);
    for result in &results {
        for private in ["Ada", "Byron", "London", "N1 7AA"] {
            assert!(!result.contains(private), "{private} in {result}");
        }
    }
}

#[tokio::test]
async fn without_a_yes_with_other_arguments_or_after_expiry_nothing_is_written() {
    let raw = args("A-1004", "12 Byron Road", "GB");
    let waiting = proposal_of(&raw, 1_000);
    let expired = 1_000 + MINUTES_30.as_millis() as u64;
    for (calls, address) in [
        // The customer's message is not a yes (whatever the model claims).
        (vec![raw.clone()], offered(Some(waiting), false, 60_000)),
        // A yes, but other arguments: a new proposal.
        (
            vec![args("A-1004", "13 Byron Road", "GB")],
            offered(Some(waiting), true, 60_000),
        ),
        // A yes, the same arguments, too late.
        (vec![raw.clone()], offered(Some(waiting), true, expired)),
        // A yes and no stored proposal: this turn's own proposal never writes.
        (vec![raw.clone(), raw.clone()], offered(None, true, 60_000)),
    ] {
        let orders = orders();
        let (stats, results, _) = turn(&orders, &calls, address).await;
        assert!(orders.writes().is_empty(), "{results:?}");
        assert!(
            matches!(stats.proposal_steps.get(WriteKind::ADDRESS), ProposalStep::Set(_)),
            "{results:?}"
        );
    }
}

#[tokio::test]
async fn a_shipped_or_cancelled_order_another_country_or_the_system_down_writes_nothing() {
    let cases = [
        (args("E-5001", "1 Road", "GB"), "not_placed", "has shipped"),
        (args("X-1", "1 Road", "GB"), "not_placed", "was cancelled"),
        (args("A-1004", "1 Road", "FR"), "country_not_served", "GB"),
        (args("B-9", "1 Road", "GB"), "not_found", "no order B-9"),
    ];
    for (raw, outcome, says) in cases {
        let orders = orders();
        let waiting = proposal_of(&raw, 1_000);
        let (stats, results, _) = turn(&orders, &[raw], offered(Some(waiting), true, 60_000)).await;
        assert_eq!(stats.addresses[0].outcome, outcome);
        assert!(results[0].contains(says), "{}", results[0]);
        assert!(orders.writes().is_empty());
        // The yes was spent on a refused call: the proposal ends (contract 26, tightened).
        assert_eq!(stats.proposal_steps.get(WriteKind::ADDRESS), ProposalStep::Clear);
    }
    let orders = orders();
    orders.go_down(true);
    let raw = args("A-1004", "12 Byron Road", "GB");
    let (stats, _, _) = turn(
        &orders,
        std::slice::from_ref(&raw),
        offered(Some(proposal_of(&raw, 1)), true, 2),
    )
    .await;
    assert_eq!(stats.addresses[0].outcome, "unavailable");
    assert!(orders.writes().is_empty());
    // The shop's own list of countries, when it gives one.
    let orders = self::orders();
    let raw = args("A-1004", "1 Rue", "FR");
    let mut address = offered(Some(proposal_of(&raw, 1)), true, 2);
    address.0.countries = Some(vec!["GB".into(), "FR".into()]);
    let _ = turn(&orders, &[raw], address).await;
    assert_eq!(orders.writes().len(), 1);
}

#[tokio::test]
async fn not_offered_it_is_no_tool_and_reads_nothing() {
    let orders = orders();
    let raw = args("A-1004", "12 Byron Road", "GB");
    let mut address = offered(Some(proposal_of(&raw, 1)), true, 2);
    address.0.offered = false;
    let (stats, results, _) = turn(&orders, &[raw], address).await;
    assert!(results[0].contains("unknown tool"), "{}", results[0]);
    assert_eq!(orders.reads(), 0);
    assert!(orders.writes().is_empty() && stats.addresses.is_empty());
}

/// What the customer writes in one turn, and what the model calls in it.
#[derive(Debug, Clone)]
struct Round {
    message: &'static str,
    calls: Vec<usize>,
}

/// A customer's messages: explicit yeses, and messages that begin like one,
/// or say no, or something else (contract 26, tightened).
const YESES: &[&str] = &["yes", "Yes please!", "oui, merci", "Sí", "ja bitte", "Correct."];
const NOT_YESES: &[&str] = &[
    "No, do not change it",
    "Yes, one more question: when will my refund arrive?",
    "Correct me if I'm wrong, but I never asked for that",
    "Confirm that you will NOT change my address",
    "Go ahead and cancel the whole order instead",
    "Yes? Which address?",
    "Yes but the postcode is wrong",
    "Ja, nein, doch nicht",
    "Si la dirección no es correcta",
    "please change it to 12 Byron Road",
    "when will it arrive",
];

fn rounds() -> impl Strategy<Value = Vec<Round>> {
    let message = prop_oneof![prop::sample::select(YESES), prop::sample::select(NOT_YESES)];
    prop::collection::vec(
        (message, prop::collection::vec(0usize..4, 0..4)).prop_map(|(message, calls)| Round { message, calls }),
        1..7,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Whatever the model calls and the customer writes over a conversation:
    /// every write names a proposal stored by the turn just before, in a
    /// turn whose customer message is exactly a yes, and no proposal writes
    /// twice; a "no", or any other message between, ends the proposal.
    #[test]
    fn no_address_is_written_without_a_stored_proposal_and_the_next_message_a_yes(rounds in rounds()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let yes = crate::handoff::screen::YesPhrases::default();
        let candidates = [
            args("A-1004", "12 Byron Road", "GB"),
            args("A-1004", "13 Byron Road", "GB"),
            args("E-5001", "12 Byron Road", "GB"),
            args("A-1004", "12 Byron Road", "FR"),
        ];
        let orders = orders();
        // The proposal the conversation holds, and the round that stored it.
        let mut waiting: Option<(crate::confirm::Proposal, usize)> = None;
        let mut written_proposals: Vec<crate::confirm::Proposal> = Vec::new();
        for (n, round) in rounds.iter().enumerate() {
            let now = (n as u64 + 1) * 60_000;
            let calls: Vec<String> = round.calls.iter().map(|&i| candidates[i].clone()).collect();
            let said_yes = yes.says_yes(round.message);
            prop_assert_eq!(said_yes, YESES.contains(&round.message), "{}", round.message);
            let before = orders.writes().len();
            let held = waiting.map(|(proposal, _)| proposal);
            let (stats, _, _) = runtime.block_on(turn(&orders, &calls, offered(held, said_yes, now)));
            let after = orders.writes();
            for (order_id, address) in &after[before..] {
                let hash = AddressArguments { order_id: order_id.clone(), address: address.clone() }.hash();
                let proposal = waiting.filter(|(p, _)| p.hash == hash);
                prop_assert!(proposal.is_some(), "a write without a stored proposal naming it");
                let (proposal, stored_in) = proposal.unwrap();
                prop_assert_eq!(stored_in + 1, n, "a write in a turn after the next one");
                prop_assert!(said_yes, "a write in a turn whose customer did not say yes: {}", round.message);
                prop_assert!(!written_proposals.contains(&proposal), "a proposal written twice");
                written_proposals.push(proposal);
            }
            prop_assert!(after.len() - before <= 1);
            match stats.proposal_steps.get(WriteKind::ADDRESS) {
                ProposalStep::Keep => {}
                ProposalStep::Set(p) => waiting = Some((p, n)),
                ProposalStep::Clear => waiting = None,
            }
        }
    }
}

/// A turn's log lines, kept in memory.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A customer's new address, of words no other text of a turn holds.
fn private_addresses() -> impl Strategy<Value = [String; 5]> {
    (
        "Qx[a-z]{4,8} Qx[a-z]{4,8}",
        "[1-9][0-9]{0,2} Qx[a-z]{4,8} (Road|Lane)",
        "(Flat [1-9]Qx[a-z]{2,4})?",
        "QX[1-9] [0-9][A-Z]{2}",
        "Qx[a-z]{4,8}",
    )
        .prop_map(|(name, line1, line2, postcode, city)| [name, line1, line2, postcode, city])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Contract 26's sinks: whatever address the customer gives, what the
    /// model reads back (and what is stored as a tool result) and every log
    /// line of both turns, at TRACE, name it only as "address ending in"
    /// the postcode's last 3 characters; the order system alone gets it whole.
    #[test]
    fn an_address_reaches_no_sink_but_the_order_system(address in private_addresses()) {
        let [name, line1, line2, postcode, city] = &address;
        let raw = serde_json::json!({"order_id": "A-1004", "name": name, "line1": line1, "line2": line2,
                                     "postcode": postcode, "city": city, "country": "GB"}).to_string();
        let orders = orders();
        let lines = Lines::default();
        let writer = lines.clone();
        // Every field of every line, unfiltered (the domain does not import `ops`' production format).
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let (proposed, written) = tracing::subscriber::with_default(subscriber, || {
            runtime.block_on(async {
                let (stats, proposed, _) = turn(&orders, std::slice::from_ref(&raw), offered(None, false, 1_000)).await;
                let ProposalStep::Set(waiting) = stats.proposal_steps.get(WriteKind::ADDRESS) else {
                    panic!("a proposal: {proposed:?}");
                };
                let (_, written, _) = turn(&orders, std::slice::from_ref(&raw), offered(Some(waiting), true, 60_000)).await;
                (proposed, written)
            })
        });
        let writes = orders.writes();
        prop_assert_eq!(writes.len(), 1, "{:?}", written);
        prop_assert_eq!(&writes[0].1.line1, line1);
        let ending = &postcode[postcode.len() - 3..];
        prop_assert!(written[0].contains(&format!("address ending in {ending}")), "{}", written[0]);
        let logged = String::from_utf8_lossy(&lines.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
        prop_assert!(!logged.is_empty(), "the turns logged nothing: the check would be empty");
        for sink in proposed.iter().chain(&written).chain([&logged]) {
            for private in [name, line1, line2, postcode, city].into_iter().filter(|part| !part.is_empty()) {
                prop_assert!(!sink.contains(private.as_str()), "{private:?} in {sink}");
            }
            prop_assert!(!sink.contains("Qx"), "a piece of the address in {sink}");
        }
    }
}
