//! The task set: plain JSON files in `eval/tasks/`, one per family. Each
//! task is a scripted customer (one message, or several in one conversation) with the orders it needs, the end state it
//! must leave (refunds made, approvals opened) and checks on the reply.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize)]
pub struct Family {
    pub family: String,
    /// The rules (not the model) must keep these safe: pass^k of "the rules
    /// held" must be 1.0 whatever the model does.
    pub safety: bool,
    pub tasks: Vec<Task>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    pub id: String,
    pub customer: String,
    pub orders: Vec<Order>,
    pub message: String,
    /// Later messages of the same conversation, each sent once the previous
    /// one was answered; the end state and the last reply are graded.
    #[serde(default)]
    pub then: Vec<String>,
    pub expect: Expect,
    #[serde(default)]
    pub reply_checks: Vec<Check>,
    /// Why the task is hard, in one line.
    pub why_hard: String,
    /// Set when the local model is known to fail the task, with why.
    #[serde(default)]
    pub local_model_fails: Option<String>,
    /// A task made from a real conversation (`refund-chat-admin
    /// replay-task`, contract 23): the conversation's id as a one-way hash.
    #[serde(default)]
    pub replayed_from: Option<String>,
    /// `AGENT_INTENTS` for the task (contract 21); absent: the default
    /// (an `address_change` task serves it, contract 26).
    #[serde(default)]
    pub agent_intents: Option<String>,
    /// Sent as a visitor (contract 27): no sign-in, the visitors' route,
    /// the token of the first answer sent back with every later message.
    #[serde(default)]
    pub visitor: bool,
    /// Sent as a guest (contract 27) who proved this e-mail: the guest
    /// pool's token (`guest:` and [`GUEST_SUB`]), the orders asked for by
    /// the e-mail; `customer` is unused.
    #[serde(default)]
    pub guest: Option<String>,
}

/// The evaluation's guest's `sub` in the guest pool.
pub const GUEST_SUB: &str = "eval-guest-0001";

impl Task {
    /// The user id the task talks as.
    pub fn user_id(&self) -> String {
        match &self.guest {
            Some(_) => refund_chat::guest::user_id(GUEST_SUB),
            None => self.customer.clone(),
        }
    }
}

impl Task {
    /// Every message the scripted customer sends, in order.
    pub fn messages(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.message.as_str()).chain(self.then.iter().map(String::as_str))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Order {
    pub order_id: String,
    pub customer: String,
    pub paid_cents: u64,
    pub refunded_cents: u64,
    /// What the order system says of it beyond its money (a replayed task
    /// keeps what the conversation saw); absent: delivered 2 days ago.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub delivered_days_ago: Option<u64>,
    /// The e-mail it was placed with (a guest's order has one and an empty
    /// `customer`, contract 27).
    #[serde(default)]
    pub email: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Refund {
    pub order_id: String,
    pub amount_cents: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Expect {
    /// Exactly these refunds reach the payments ledger.
    pub refunds: Vec<Refund>,
    /// Exactly these approvals are opened; `null`: any (safety tasks, where
    /// sending a refund to a person is a fine answer too).
    pub approvals: Option<Vec<Refund>>,
    /// The conversation is handed to a person for one of these reasons; `[]`:
    /// it is not handed off; absent: either is fine.
    #[serde(default)]
    pub handoff: Option<Vec<String>>,
    /// Refunds the rules allow whatever the model does, beyond the expected
    /// ones: a refused refund leaves the latch open (contract 16), so a
    /// model may follow a refused amount with one the rules allow on the
    /// customer's own order. "The rules held" counts these as held.
    #[serde(default)]
    pub rules_allow: Vec<Refund>,
    /// None of these reach any request to the model (the order's address:
    /// the tools hold personal data, the prompt references).
    #[serde(default)]
    pub prompts_never_mention: Vec<String>,
    /// The router's intents for the first message (contract 21): graded
    /// right when the router named every one of them (it may name more).
    #[serde(default)]
    pub intents: Option<Vec<String>>,
    /// The router's risk for the first message (`low`, `high`).
    #[serde(default)]
    pub risk: Option<String>,
    /// Exactly this many order reads reach the order system (a visitor's
    /// turn: none, contract 27); absent: any.
    #[serde(default)]
    pub order_reads: Option<usize>,
    /// Exactly these changes of address reach the order system (contract
    /// 26); absent: none may. Graded on the order system's end state.
    #[serde(default)]
    pub addresses: Vec<AddressWritten>,
    /// Changes of address "the rules held" allows beyond the expected ones:
    /// a scripted customer's later yes confirms whatever code's own line
    /// named, the adversary's address too (contract 26's guarantee is the
    /// yes, not the customer's attention).
    #[serde(default)]
    pub rules_allow_addresses: Vec<AddressWritten>,
    /// Exactly these orders have a return started (contract 28); absent:
    /// none may. Graded on the order system's end state.
    #[serde(default)]
    pub returns: Vec<String>,
    /// Returns "the rules held" allows beyond the expected ones: a scripted
    /// customer's later yes confirms whatever code's own line named.
    #[serde(default)]
    pub rules_allow_returns: Vec<String>,
}

/// A change of address the order system took: the order and the new postcode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AddressWritten {
    pub order_id: String,
    pub postcode: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::enum_variant_names)] // the names are the task files' keys
pub enum Check {
    /// The reply names the refund id of the refund made.
    MentionsRefundId(bool),
    /// The reply says at least one of these (case-insensitive).
    MentionsAny(Vec<String>),
    /// The reply says none of these (case-insensitive).
    MentionsNone(Vec<String>),
    /// Every number in the reply is one of these: a rule's number comes from
    /// the shop's articles, never from a model's memory.
    NumbersOnlyFrom(Vec<String>),
}

/// The families of `dir`, with the replayed tasks of `dir/replayed/` each
/// joining the family its file names (a family of its own if none has it).
pub fn load_with_replayed(dir: &Path) -> std::io::Result<Vec<Family>> {
    let mut families = load(dir)?;
    let replayed = dir.join("replayed");
    if !replayed.is_dir() {
        return Ok(families);
    }
    for family in load(&replayed)? {
        match families.iter_mut().find(|f| f.family == family.family) {
            Some(joined) => joined.tasks.extend(family.tasks),
            None => families.push(family),
        }
    }
    Ok(families)
}

pub fn load(dir: &Path) -> std::io::Result<Vec<Family>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)?;
            serde_json::from_str(&text).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))
        })
        .collect()
}
