//! Who has a conversation on the support team (contract 30), on its
//! header: `holder` (the verified `sub`, or `terminal:<name>` for
//! `refund-chat-admin`), `holder_name`, `held_since`, and
//! `held_taken_over_from` when a person took it over from another. Claim
//! and release are one conditional `UpdateItem` each, so of two people
//! claiming at once exactly one has it and the other is told who; a reply
//! or a close checks the holder in its own conditional write
//! ([`hold_condition`]).

use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure, Update};

use super::schema::{CONVERSATION_HEAD as HEAD, CONVERSATION_SORT_KEY as SORT_KEY};
use super::{DynamoClient, Item, malformed, n, number, s, text, update_item};
use crate::clock::rfc3339;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;

/// How often a claim follows a holder that changed under it.
const CLAIM_TRIES: usize = 4;

/// Who has a conversation, and since when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    /// The verified `sub` (a terminal's: `terminal:<name>`).
    #[serde(skip)]
    pub key: String,
    pub name: String,
    pub since: String,
    /// Whom they took it over from, when they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_over_from: Option<String>,
    /// The reader holds it (contract 30): said by the server from the
    /// verified `sub`, never by comparing display names, which an
    /// administrator may give twice ([`Holder::as_seen_by`]); absent from
    /// a read that does not say (a search's lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yours: Option<bool>,
}

impl Holder {
    /// The holder as the person under `key` reads it.
    pub fn as_seen_by(mut self, key: &str) -> Holder {
        self.yours = Some(self.key == key);
        self
    }
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// `by` has it now (or had it already).
    Holding(Holder),
    /// Someone else has it: nothing was written.
    HeldBy(Holder),
    /// Unknown or expired.
    NotFound,
}

/// What a release found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    Released,
    /// Nobody had it.
    NotHeld,
    HeldBy(Holder),
    NotFound,
}

/// The key a person holds a conversation under: the `sub` the staff pool
/// verified; a terminal's person, named on its command line, by that name.
pub fn holder_key(by: Person<'_>) -> String {
    by.sub.map_or_else(|| format!("terminal:{}", by.name), str::to_owned)
}

/// The holder a conversation's header names.
pub fn holder_of(head: &Item) -> Option<Holder> {
    Some(Holder {
        key: text(head, "holder")?.to_owned(),
        name: text(head, "holder_name").unwrap_or_default().to_owned(),
        since: text(head, "held_since").unwrap_or_default().to_owned(),
        taken_over_from: text(head, "held_taken_over_from").map(str::to_owned),
        yours: None,
    })
}

/// The condition a write by the holder `:holder` needs: nobody has the
/// conversation, or they do.
pub const HOLD_CONDITION: &str = "(attribute_not_exists(holder) OR holder = :holder)";

/// `update` conditioned, beside its own condition, on [`HOLD_CONDITION`]
/// for `by`, and taking the conversation for them when nobody has it.
pub fn hold_condition(
    update: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    by: Person<'_>,
    now_ms: u64,
) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    let condition = match update.get_condition_expression() {
        Some(own) => format!("({own}) AND {HOLD_CONDITION}"),
        None => HOLD_CONDITION.to_owned(),
    };
    let expression = update.get_update_expression().clone().unwrap_or_default().replacen(
        "SET ",
        "SET holder = if_not_exists(holder, :holder), holder_name = if_not_exists(holder_name, :holder_name), \
             held_since = if_not_exists(held_since, :held_since), ",
        1,
    );
    update
        .condition_expression(condition)
        .update_expression(expression)
        .expression_attribute_values(":holder", s(holder_key(by)))
        .expression_attribute_values(":holder_name", s(by.name))
        .expression_attribute_values(":held_since", s(rfc3339(now_ms)))
}

fn head_update(table: &str, id: &str) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    Update::builder()
        .table_name(table)
        .key("pk", s(id))
        .key(SORT_KEY, s(HEAD))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
}

/// `by` claims conversation `id`: one conditional write, that nobody
/// else has it, or, with `take_over`, that someone else has it (whose
/// name is recorded). A take-over of a conversation nobody has is a claim.
pub(super) async fn claim(
    client: &DynamoClient,
    table: &str,
    id: &str,
    by: Person<'_>,
    take_over: bool,
    now_ms: u64,
) -> Result<Claimed, LedgerError> {
    let key = holder_key(by);
    let live = "attribute_exists(pk) AND expires_at > :now_s";
    // Each failed try saw the holder change under it: a few at most.
    let mut taking_over = take_over;
    for _ in 0..CLAIM_TRIES {
        let (condition, expression) = if taking_over {
            (
                format!("{live} AND attribute_exists(holder) AND holder <> :holder"),
                "SET held_taken_over_from = holder_name, holder = :holder, holder_name = :name, held_since = :now",
            )
        } else {
            (
                format!("{live} AND (attribute_not_exists(holder) OR holder = :holder)"),
                "SET holder = :holder, holder_name = :name, held_since = if_not_exists(held_since, :now)",
            )
        };
        let update = head_update(table, id)
            .condition_expression(condition)
            .update_expression(expression)
            .expression_attribute_values(":holder", s(&key))
            .expression_attribute_values(":name", s(by.name))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .build()
            .map_err(malformed)?;
        match update_item(client, &update, ReturnValue::AllNew).await? {
            Ok(written) => return Ok(holder_of(&written).map_or(Claimed::NotFound, Claimed::Holding)),
            Err(found) if !live_head(&found, now_ms) => return Ok(Claimed::NotFound),
            Err(found) => match holder_of(&found) {
                Some(holder) if holder.key != key && !taking_over => return Ok(Claimed::HeldBy(holder)),
                Some(holder) if holder.key != key => taking_over = true,
                // Nobody (or oneself) has it: a take-over is a claim.
                _ => taking_over = false,
            },
        }
    }
    Err(LedgerError::Contended)
}

/// `by` gives conversation `id` back: one conditional write, that they have it.
pub(super) async fn release(
    client: &DynamoClient,
    table: &str,
    id: &str,
    by: Person<'_>,
    now_ms: u64,
) -> Result<Released, LedgerError> {
    let update = head_update(table, id)
        .condition_expression("attribute_exists(pk) AND expires_at > :now_s AND holder = :holder")
        .update_expression("REMOVE holder, holder_name, held_since, held_taken_over_from")
        .expression_attribute_values(":holder", s(holder_key(by)))
        .expression_attribute_values(":now_s", n(now_ms / 1000))
        .build()
        .map_err(malformed)?;
    match update_item(client, &update, ReturnValue::None).await? {
        Ok(_) => Ok(Released::Released),
        Err(found) if !live_head(&found, now_ms) => Ok(Released::NotFound),
        Err(found) => Ok(holder_of(&found).map_or(Released::NotHeld, Released::HeldBy)),
    }
}

fn live_head(found: &Item, now_ms: u64) -> bool {
    number(found, "expires_at").is_some_and(|at| at > now_ms / 1000)
}
