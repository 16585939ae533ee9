//! `change_delivery_address` (contract 26): a write on the confirmation
//! walk ([`super::write`]), checked against the order read afresh as the
//! verified customer: placed, not shipped, and to a country the shop
//! serves. Never logs the address.

use std::time::Duration;

use serde_json::Value;

use super::write::{Refused, Write, Written};
use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::{ProposalStep, WriteKind};
use crate::handoff::Reason;
use crate::orders::address::{self as address_tool, AddressArguments, AddressRecord, AddressWrite};
use crate::orders::{self, Order, OrderSystem};
use crate::refund::RefundGateway;
use crate::refund::tool::SchemaFailure;
use crate::untrusted;

pub(super) const DECLARED: Declared = Declared {
    name: address_tool::TOOL_NAME,
    description: address_tool::TOOL_DESCRIPTION,
    parameters: address_tool::declared_parameters,
};
pub(super) const STEP: Step = Step::Order;
pub(super) const KIND: Option<WriteKind> = Some(WriteKind::ADDRESS);

/// Once `address_change` is served and routed, or a proposal waits; never
/// a visitor's.
pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    session.address.offered && !session.visitor
}

pub(super) async fn carry_out<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &str,
) -> String {
    super::write::carry_out::<AddressChange, G, O>(session, arguments).await
}

struct AddressChange;

impl Write for AddressChange {
    type Arguments = AddressArguments;
    type Checked = ();
    const KIND: WriteKind = WriteKind::ADDRESS;
    const TOOL: &'static str = address_tool::TOOL_NAME;

    fn parse(raw: &str) -> Result<AddressArguments, SchemaFailure> {
        address_tool::parse_arguments(raw)
    }

    fn order_id(arguments: &AddressArguments) -> &str {
        &arguments.order_id
    }

    fn hash(arguments: &AddressArguments) -> [u8; 32] {
        arguments.hash()
    }

    fn one_per_order() -> Value {
        address_tool::one_per_order()
    }

    fn not_found(order_id: &str) -> Value {
        address_tool::not_found(order_id)
    }

    fn unavailable() -> Value {
        address_tool::unavailable()
    }

    async fn check<G: RefundGateway, O: OrderSystem>(
        session: &mut Session<'_, G, O>,
        order: &Order,
        arguments: &AddressArguments,
    ) -> Result<(), Refused> {
        if order.status != orders::OrderStatus::Placed {
            return Err((address_tool::not_placed(order.status), "not_placed"));
        }
        let allowed = session
            .address
            .countries
            .clone()
            .unwrap_or_else(|| vec![order.ship_to.country.to_ascii_uppercase()]);
        if !allowed.contains(&arguments.address.country) {
            return Err((
                address_tool::country_not_served(&arguments.address.country, &allowed),
                "country_not_served",
            ));
        }
        Ok(())
    }

    fn proposed(arguments: &AddressArguments, _: &()) -> Value {
        address_tool::confirm(arguments)
    }

    fn confirm_line(arguments: &AddressArguments, _: &()) -> String {
        arguments.confirm_line()
    }

    async fn write<G: RefundGateway, O: OrderSystem>(
        session: &mut Session<'_, G, O>,
        _: &Order,
        arguments: &AddressArguments,
        _: &(),
        key: &str,
    ) -> Written {
        let shopper = session.shopper();
        let written = session
            .ports
            .orders
            .change_address(&arguments.order_id, &shopper, &arguments.address, key)
            .await;
        let (result, outcome, step, handoff) = match written {
            AddressWrite::Changed => (address_tool::changed(arguments), "changed", ProposalStep::Clear, None),
            AddressWrite::Shipped => (
                address_tool::shipped_meanwhile(),
                "shipped_meanwhile",
                ProposalStep::Clear,
                None,
            ),
            // Kept for the person who checks, to whom code hands the
            // conversation (contract 26): its key writes at most once.
            AddressWrite::Unknown(_) => (
                address_tool::unknown_outcome(),
                "unknown",
                ProposalStep::Keep,
                Some(Reason::AddressWriteUnknown),
            ),
        };
        metrics::counter!("AddressChanges", "Outcome" => outcome).increment(1);
        Written {
            result,
            outcome,
            step,
            handoff,
            kept: None,
        }
    }

    fn record<G, O>(
        session: &mut Session<'_, G, O>,
        arguments: &AddressArguments,
        outcome: &'static str,
        _: Option<String>,
        took: Duration,
    ) {
        tracing::info!(
            event = "tool_call",
            tool = address_tool::TOOL_NAME,
            validation = "ok",
            order_id = untrusted::order_id_for_log(&arguments.order_id),
            order_id_chars = arguments.order_id.chars().count(),
            address_outcome = outcome,
            customer_said_yes = session.confirmation.said_yes,
            latency_ms = took.as_secs_f64() * 1000.0,
        );
        session.stats.addresses.push(AddressRecord {
            order_id: arguments.order_id.clone(),
            outcome,
        });
    }
}
