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
//! Adding a tool: its file here, and its line in the `tools!` list. A
//! write the agent may make is a tool whose `carry_out` is the
//! confirmation walk ([`write`]) over its [`write::Write`].

use crate::chat::{Declared, Offered};
use crate::confirm::WriteKind;
use crate::live::Step;
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::refund::tool::ToolResult;

mod session;
mod write;

/// At most this many order reads a message (the read tool's bound, shared by the writes).
pub use crate::orders::tool::MAX_READS as MAX_ORDER_READS;
pub use refund::MAX_REFUND_CHECKS;
pub use session::{AddressTurn, Ports, RefundLatch, ReturnTurn, Session, TurnStats};

/// The one list: a line a tool, in the order a call declares them. Each
/// names its file, which holds `DECLARED`, `STEP` (what the page is told
/// while it runs), `KIND` (a write's, on the confirmation walk; else
/// none), `offered` and `carry_out`.
macro_rules! tools {
    ($( $(#[$attr:meta])* $tool:ident => $file:ident ),* $(,)?) => {
        $( $(#[$attr])* mod $file; )*

        /// Every tool the agent may be given.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Tool {
            $( $(#[$attr])* $tool, )*
        }

        impl Tool {
            /// In the order a call declares them.
            pub const ALL: &'static [Tool] = &[ $( $(#[$attr])* Tool::$tool, )* ];

            pub fn declared(self) -> Declared {
                match self {
                    $( $(#[$attr])* Tool::$tool => $file::DECLARED, )*
                }
            }

            /// What the customer's page is told is happening while it runs.
            fn step(self) -> Step {
                match self {
                    $( $(#[$attr])* Tool::$tool => $file::STEP, )*
                }
            }

            /// A write's kind: its proposals are the conversation's to keep.
            pub fn kind(self) -> Option<WriteKind> {
                match self {
                    $( $(#[$attr])* Tool::$tool => $file::KIND, )*
                }
            }

            /// Whether this turn declares it, and so may run it.
            fn offered<G, O>(self, session: &Session<'_, G, O>) -> bool {
                match self {
                    $( $(#[$attr])* Tool::$tool => $file::offered(session), )*
                }
            }

            async fn carry_out<G: RefundGateway, O: OrderSystem>(
                self,
                session: &mut Session<'_, G, O>,
                arguments: &str,
            ) -> String {
                match self {
                    $( $(#[$attr])* Tool::$tool => $file::carry_out(session, arguments).await, )*
                }
            }
        }
    };
}

tools! {
    Refund => refund,
    Handoff => handoff,
    Order => order,
    Help => help,
    Address => address,
    Return => returns,
    #[cfg(test)] CancelOrder => cancel_order,
}

/// Every kind of write the agent may make: the kinds whose proposals a
/// conversation keeps.
pub fn write_kinds() -> impl Iterator<Item = WriteKind> {
    Tool::ALL.iter().filter_map(|tool| tool.kind())
}

/// What this turn's calls declare: every tool offered, in [`Tool::ALL`]'s order.
pub fn offered<G, O>(session: &Session<'_, G, O>) -> Offered {
    Offered {
        tools: Tool::ALL
            .iter()
            .filter(|tool| tool.offered(session))
            .map(|tool| tool.declared())
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
        .iter()
        .copied()
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
