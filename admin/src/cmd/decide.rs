//! The decisions (`approve`, `reissue`, `reject`, `resolve`, `reply`,
//! `close-handoff`, `claim`, `release`, `note`, and `--intent` on them): the support team's library
//! ([`refund_chat::staff::decide`]) makes them, the same code the desk
//! runs; here they are printed and mapped to the exit status.

use refund_chat::router::Intent;
use refund_chat::staff::decide::{Decided, Outcome as Decision};

use crate::Ending;

/// A decision's ending for a terminal.
pub fn ending(decided: Decided) -> Ending {
    match decided.outcome {
        Decision::Done => {
            println!("{}", decided.text);
            Ending::Done
        }
        // Payments was not called, or the intent not recorded: a person checks.
        Decision::Uncertain | Decision::VerdictNotRecorded => Ending::Failed(decided.text),
        Decision::Unrecorded => Ending::Unrecorded(decided.text),
        Decision::NotFound
        | Decision::AlreadyDecided
        | Decision::Invalid
        | Decision::OrderRefused
        | Decision::TryAgain
        | Decision::PaymentsFailed
        | Decision::HeldByAnother
        | Decision::LimitReached => Ending::Refused(decided.text),
    }
}

/// `--intent`'s value: a name from the router's list.
pub fn parse_intent(text: &str) -> Result<Intent, String> {
    Intent::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Intent::ALL.iter().map(|intent| intent.as_str()).collect();
        format!("{text:?} is not an intent ({})", names.join(", "))
    })
}
