//! The agent's tools: one list, one file a tool.
//!
//! A tool's file holds what the turn must not know: its declaration (the
//! name, the strict schema and the description, from the domain module
//! that owns its arguments and results), when it is offered, and how its
//! call is carried out against the ports it needs: the result the model
//! reads, the outcome it logs, and what it adds to the turn's stats. The
//! turn ([`crate::turn`]) runs the loop and hands each call to [`run`],
//! which finds the tool by name in [`Tool::ALL`]; it knows no tool by name,
//! as mini-redis's connection loop knows no command.
//!
//! Adding a tool: its file here (`DECLARED`, `offered`, `carry_out`), and
//! its variant in [`Tool`] with its three lines in the three matches below.

use crate::chat::{Declared, Offered};
use crate::live::Step;
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::refund::tool::ToolResult;

mod address;
mod handoff;
mod help;
mod order;
mod refund;
mod returns;
mod session;

pub use refund::MAX_REFUND_CHECKS;
pub use session::{AddressTurn, Ports, RefundLatch, ReturnTurn, Session, TurnStats};

/// Every tool the agent may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Refund,
    Handoff,
    Order,
    Help,
    Address,
    Return,
}

impl Tool {
    /// In the order a call declares them.
    pub const ALL: [Tool; 6] = [
        Tool::Refund,
        Tool::Handoff,
        Tool::Order,
        Tool::Help,
        Tool::Address,
        Tool::Return,
    ];

    pub fn declared(self) -> Declared {
        match self {
            Tool::Refund => refund::DECLARED,
            Tool::Handoff => handoff::DECLARED,
            Tool::Order => order::DECLARED,
            Tool::Help => help::DECLARED,
            Tool::Address => address::DECLARED,
            Tool::Return => returns::DECLARED,
        }
    }

    /// Whether this turn declares it, and so may run it.
    fn offered<G, O>(self, session: &Session<'_, G, O>) -> bool {
        match self {
            Tool::Refund => refund::offered(session),
            Tool::Handoff => handoff::offered(session),
            Tool::Order => order::offered(session),
            Tool::Help => help::offered(session),
            Tool::Address => address::offered(session),
            Tool::Return => returns::offered(session),
        }
    }

    /// What the customer's page is told is happening while it runs.
    fn step(self) -> Step {
        match self {
            Tool::Refund => Step::RefundCheck,
            Tool::Handoff => Step::Handoff,
            Tool::Help => Step::HelpCentre,
            Tool::Order | Tool::Address | Tool::Return => Step::Order,
        }
    }

    async fn carry_out<G: RefundGateway, O: OrderSystem>(
        self,
        session: &mut Session<'_, G, O>,
        arguments: &str,
    ) -> String {
        match self {
            Tool::Refund => refund::carry_out(session, arguments).await,
            Tool::Handoff => handoff::carry_out(session, arguments),
            Tool::Order => order::carry_out(session, arguments).await,
            Tool::Help => help::carry_out(session, arguments),
            Tool::Address => address::carry_out(session, arguments).await,
            Tool::Return => returns::carry_out(session, arguments).await,
        }
    }
}

/// What this turn's calls declare: every tool offered, in [`Tool::ALL`]'s order.
pub fn offered<G, O>(session: &Session<'_, G, O>) -> Offered {
    Offered {
        tools: Tool::ALL
            .into_iter()
            .filter(|tool| tool.offered(session))
            .map(Tool::declared)
            .collect(),
    }
}

/// Runs one tool call and returns what the model is told. Nothing here
/// fails the request: every problem goes back to the model as `{"error"}`.
/// A tool not offered this turn is no tool at all.
pub async fn run<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    name: &str,
    arguments: &str,
) -> String {
    let found = Tool::ALL
        .into_iter()
        .find(|tool| tool.declared().name == name && tool.offered(session));
    match found {
        Some(tool) => {
            session.progress(tool.step());
            tool.carry_out(session, arguments).await
        }
        None => unknown(session, name),
    }
}

/// A call of a tool this turn did not declare: what the model claims
/// decides nothing.
fn unknown<G, O>(session: &mut Session<'_, G, O>, name: &str) -> String {
    session.stats.invalid_tool_calls += 1;
    // The name is the model's: it may be the customer's words.
    let (validation, told) = if session.visitor {
        (
            "not_for_visitors",
            format!(
                "unknown tool {name:?}: the tools are {} and {}; the customer must confirm their e-mail address or sign in before anything about an order",
                help::DECLARED.name,
                handoff::DECLARED.name
            ),
        )
    } else {
        (
            "unknown_tool",
            format!(
                "unknown tool {name:?}: the tools are {}, {}, {} and {}",
                order::DECLARED.name,
                help::DECLARED.name,
                refund::DECLARED.name,
                handoff::DECLARED.name
            ),
        )
    };
    tracing::warn!(event = "tool_call", tool_chars = name.chars().count(), validation);
    ToolResult::error(told).to_json()
}
