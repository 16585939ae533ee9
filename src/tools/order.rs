//! `get_order` (contract 16): reads the order with the verified customer,
//! never the model's; spends no latch; at most [`tool::MAX_READS`] reads,
//! which the writes share.

use std::time::Duration;

use tokio::time::Instant;

use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::WriteKind;
use crate::orders::tool::{self, TOOL_NAME};
use crate::orders::{OrderLookup, OrderSystem};
use crate::untrusted;

pub(super) const DECLARED: Declared = Declared {
    name: TOOL_NAME,
    description: tool::TOOL_DESCRIPTION,
    parameters: tool::declared_parameters,
};
pub(super) const STEP: Step = Step::Order;
pub(super) const KIND: Option<WriteKind> = None;

/// Never a visitor's (contract 27).
pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    !session.visitor
}

pub(super) async fn carry_out<G, O: OrderSystem>(session: &mut Session<'_, G, O>, arguments: &str) -> String {
    let order_id = match tool::parse_arguments(arguments) {
        Ok(order_id) => order_id,
        Err(error) => {
            return session
                .rejected(TOOL_NAME, error.schema_paths(), error.to_string())
                .to_json();
        }
    };
    let refused = session.stats.order_reads >= tool::MAX_READS;
    let (lookup, took) = if refused {
        (None, Duration::ZERO)
    } else {
        session.stats.order_reads += 1;
        let started = Instant::now();
        let shopper = session.shopper();
        let lookup = session.read_order(&order_id, &shopper).await;
        (Some(lookup), started.elapsed())
    };
    tracing::info!(
        event = "tool_call",
        tool = TOOL_NAME,
        validation = "ok",
        order_id = untrusted::order_id_for_log(&order_id),
        order_id_chars = order_id.chars().count(),
        order_lookup = lookup.as_ref().map_or("refused_too_many", OrderLookup::name),
        latency_ms = took.as_secs_f64() * 1000.0,
    );
    match lookup {
        Some(lookup) => tool::for_lookup(&order_id, &lookup),
        None => tool::too_many_reads(),
    }
    .to_string()
}
