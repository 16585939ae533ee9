//! Who on the team has a conversation (contract 30): claim, take over and
//! release, each one conditional write on the conversation's header
//! ([`crate::ledger::dynamo::holders`]). A reply or a close by anyone but
//! the one who has it is refused the same way ([`held_by_another`]), and a
//! reply to a conversation nobody has claims it, so two people never
//! answer one customer at once.

use crate::clock::now_ms;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;
use crate::ledger::dynamo::holders::{Claimed, Released};
use crate::push::{Kind as PokeKind, Poke};
use crate::untrusted::visible;

use super::Staff;
use super::decide::{Decided, Kind, Outcome, conversation_named, held_by_another, noted};

/// `by` claims the conversation `id` names (a handoff's id names its
/// conversation); with `take_over`, from whoever has it.
pub async fn claim(staff: &Staff, id: &str, by: Person<'_>, take_over: bool) -> Result<Decided, LedgerError> {
    let conversation = conversation_named(id);
    let decided = match staff
        .conversations
        .claim_hold(&conversation, by, take_over, now_ms())
        .await?
    {
        Claimed::Holding(holder) => Decided::done(match &holder.taken_over_from {
            Some(from) if take_over => format!(
                "you have {} now, taken over from {}",
                visible(&conversation),
                visible(from)
            ),
            _ => format!("you have {} since {}", visible(&conversation), visible(&holder.since)),
        })
        .poking(Poke::new(&conversation, 0, PokeKind::Held)),
        Claimed::HeldBy(holder) => held_by_another(&conversation, &holder, "it was not claimed"),
        Claimed::NotFound => not_found(&conversation),
    };
    noted(staff, Kind::Claim, id, by, &decided).await;
    Ok(decided)
}

/// `by` gives back the conversation `id` names, which they have.
pub async fn release(staff: &Staff, id: &str, by: Person<'_>) -> Result<Decided, LedgerError> {
    let conversation = conversation_named(id);
    let decided = match staff.conversations.release_hold(&conversation, by, now_ms()).await? {
        Released::Released => Decided::done(format!("released {}: nobody has it now", visible(&conversation)))
            .poking(Poke::new(&conversation, 0, PokeKind::Held)),
        Released::NotHeld => Decided::done(format!("nobody had {}", visible(&conversation))),
        Released::HeldBy(holder) => held_by_another(&conversation, &holder, "it was not released"),
        Released::NotFound => not_found(&conversation),
    };
    noted(staff, Kind::Release, id, by, &decided).await;
    Ok(decided)
}

fn not_found(conversation: &str) -> Decided {
    Decided::new(
        Outcome::NotFound,
        format!("no conversation {} (unknown, or it has expired)", visible(conversation)),
    )
}
