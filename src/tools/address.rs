//! `change_delivery_address` (contract 26): checked against the order read
//! afresh as the verified customer; a first call proposes, and only a call
//! of a later turn whose customer said yes, with exactly the proposed
//! arguments, writes ([`crate::confirm`]). Never logs the address.

use tokio::time::Instant;

use super::Session;
use crate::chat::Declared;
use crate::confirm::{self, Confirmation, Decision, ProposalStep, WriteKind};
use crate::handoff::Reason;
use crate::orders::address::{self as address_tool, AddressArguments, AddressRecord, AddressWrite};
use crate::orders::tool as order_tool;
use crate::orders::{self, OrderLookup, OrderSystem};
use crate::untrusted;

pub(super) const DECLARED: Declared = Declared {
    name: address_tool::TOOL_NAME,
    description: address_tool::TOOL_DESCRIPTION,
    parameters: address_tool::declared_parameters,
};

/// Once `address_change` is served and routed, or a proposal waits; never
/// a visitor's.
pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    session.address.offered && !session.visitor
}

/// `change_delivery_address` (contract 26): checked against the order
/// read afresh as the verified customer; a first call proposes, and
/// only a call of a later turn whose customer said yes, with exactly the
/// proposed arguments, writes. Never logs the address.
pub(super) async fn carry_out<G, O: OrderSystem>(session: &mut Session<'_, G, O>, arguments: &str) -> String {
    let arguments = match address_tool::parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            return session
                .rejected(address_tool::TOOL_NAME, error.schema_paths(), error.to_string())
                .to_json();
        }
    };
    let started = Instant::now();
    let (result, outcome) = attempt(session, &arguments).await;
    tracing::info!(
        event = "tool_call",
        tool = address_tool::TOOL_NAME,
        validation = "ok",
        order_id = untrusted::order_id_for_log(&arguments.order_id),
        order_id_chars = arguments.order_id.chars().count(),
        address_outcome = outcome,
        customer_said_yes = session.confirmation.said_yes,
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
    );
    session.stats.addresses.push(AddressRecord {
        order_id: arguments.order_id.clone(),
        outcome,
    });
    result.to_string()
}

async fn attempt<G, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &AddressArguments,
) -> (serde_json::Value, &'static str) {
    let order_id = &arguments.order_id;
    if session.addresses_written.contains(order_id) {
        return (address_tool::one_per_order(), "one_per_order");
    }
    // The order read and the write share `get_order`'s reads (each a
    // read's two tries at most), so the turn's worst case stays as it was.
    if session.stats.order_reads >= order_tool::MAX_READS {
        return (order_tool::too_many_reads(), "too_many_reads");
    }
    session.stats.order_reads += 1;
    let shopper = session.shopper();
    let order = match session.read_order(order_id, &shopper).await {
        OrderLookup::Found(order) => order,
        OrderLookup::NotFound => return (address_tool::not_found(order_id), "not_found"),
        OrderLookup::Unavailable(_) => return (address_tool::unavailable(), "unavailable"),
    };
    if order.status != orders::OrderStatus::Placed {
        return (address_tool::not_placed(order.status), "not_placed");
    }
    let allowed = session
        .address
        .countries
        .clone()
        .unwrap_or_else(|| vec![order.ship_to.country.to_ascii_uppercase()]);
    if !allowed.contains(&arguments.address.country) {
        return (
            address_tool::country_not_served(&arguments.address.country, &allowed),
            "country_not_served",
        );
    }
    let decided = session
        .confirmation
        .decide(WriteKind::Address, arguments.hash(), &mut session.stats.proposal_steps);
    let proposal = match decided {
        Decision::Write(proposal) => proposal,
        Decision::WhichOne => return (session.confirmation.which_one(), "which_one"),
        Decision::Again(_) => return (address_tool::confirm(arguments), "proposed"),
        Decision::Ambiguous => {
            session.stats.code_lines.retain(|(kind, _)| *kind != WriteKind::Address);
            return (Confirmation::ambiguous(WriteKind::Address), "ambiguous");
        }
        Decision::Propose(proposal) => {
            session
                .stats
                .proposal_steps
                .set(WriteKind::Address, ProposalStep::Set(proposal));
            session
                .stats
                .code_lines
                .push((WriteKind::Address, arguments.confirm_line()));
            return (address_tool::confirm(arguments), "proposed");
        }
    };
    if session.stats.order_reads >= order_tool::MAX_READS {
        return (order_tool::too_many_reads(), "too_many_reads");
    }
    session.stats.order_reads += 1;
    session.addresses_written.push(order_id.clone());
    // A proposal this turn made is gone once a confirmed one is written.
    session.stats.code_lines.retain(|(kind, _)| *kind != WriteKind::Address);
    let key = confirm::write_key(WriteKind::Address, &session.conversation_key(), &proposal);
    match session
        .ports
        .orders
        .change_address(order_id, &shopper, &arguments.address, &key)
        .await
    {
        AddressWrite::Changed => {
            metrics::counter!("AddressChanges", "Outcome" => "changed").increment(1);
            session
                .stats
                .proposal_steps
                .set(WriteKind::Address, ProposalStep::Clear);
            (address_tool::changed(arguments), "changed")
        }
        AddressWrite::Shipped => {
            metrics::counter!("AddressChanges", "Outcome" => "shipped_meanwhile").increment(1);
            session
                .stats
                .proposal_steps
                .set(WriteKind::Address, ProposalStep::Clear);
            (address_tool::shipped_meanwhile(), "shipped_meanwhile")
        }
        // Kept for the person who checks, to whom code hands the
        // conversation (contract 26): its key writes at most once.
        AddressWrite::Unknown(_) => {
            metrics::counter!("AddressChanges", "Outcome" => "unknown").increment(1);
            session.stats.proposal_steps.set(WriteKind::Address, ProposalStep::Keep);
            session.hand_off_in_code(Reason::AddressWriteUnknown);
            (address_tool::unknown_outcome(), "unknown")
        }
    }
}
