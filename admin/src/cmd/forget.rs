//! `forget --customer USER --by NAME`: the right to be forgotten (contract
//! 11): the customer's conversations and request records deleted, their
//! messages removed from their refund records, which stay; recorded.
//!
//! A guest (contract 27) also has a user in the guest pool, which holds
//! their e-mail: it is deleted last, so that a forget that failed half-way
//! is run again whole. `--email` finds the guest by the e-mail they proved
//! (the pool's, never the project's: no table of ours holds it), and the
//! e-mail is printed and logged nowhere.

use refund_chat::clock::now_ms;
use refund_chat::guest::directory::GuestDirectory;
use refund_chat::guest::{self, GuestEmail};
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

/// Whom to forget: a user id, or a guest by e-mail.
pub enum Who {
    UserId(String),
    GuestEmail(String),
}

pub async fn run(
    ledger: &DynamoLedger,
    conversations: &DynamoConversations,
    guests: Option<&GuestDirectory>,
    who: Who,
    by: &str,
) -> Outcome {
    let customer = match who {
        Who::UserId(user_id) => user_id,
        Who::GuestEmail(email) => {
            let (Some(guests), Some(email)) = (guests, GuestEmail::parse(&email)) else {
                return Ok(Ending::Failed(
                    "--email needs GUEST_POOL_ID (the guest pool) and an e-mail address".into(),
                ));
            };
            match guests.find(&email).await {
                Ok(Some(sub)) => guest::user_id(&sub),
                Ok(None) => return Ok(Ending::Refused("the guest pool has no guest with that e-mail".into())),
                Err(error) => return Ok(Ending::Failed(format!("the guest pool: {error}"))),
            }
        }
    };
    let customer = customer.as_str();
    let pool_user = customer.strip_prefix(guest::USER_PREFIX);
    if pool_user.is_some() && guests.is_none() {
        return Ok(Ending::Failed(
            "a guest's user is in the guest pool: set GUEST_POOL_ID, then forget them".into(),
        ));
    }
    let now = now_ms();
    let ids = conversations.of_customer(customer).await?;
    for id in &ids {
        conversations.delete(id).await?;
    }
    // The orders their conversations named (contract 30's search).
    conversations.forget_postings(customer).await?;
    let forgotten = ledger.forget_customer(customer, by, now).await?;
    ledger.record_forget(customer, by, now, forgotten, ids.len()).await?;
    tracing::info!(
        event = "staff_decision",
        action = "forget",
        by,
        conversations_deleted = ids.len(),
        messages_removed = forgotten.messages_removed,
        request_records_deleted = forgotten.request_records_deleted,
    );
    println!(
        "forgot {}: {} conversation(s) deleted, the message removed from {} refund record(s), {} request record(s) \
         deleted; the refund records stay (the shop's financial record)",
        visible(customer),
        ids.len(),
        forgotten.messages_removed,
        forgotten.request_records_deleted
    );
    if let (Some(sub), Some(guests)) = (pool_user, guests) {
        match guests.delete(sub).await {
            Ok(deleted) => println!(
                "{} the guest pool's user",
                if deleted { "deleted" } else { "no longer in the pool:" }
            ),
            Err(error) => {
                return Ok(Ending::Failed(format!(
                    "the guest pool's user was not deleted ({error}): run the same forget again"
                )));
            }
        }
    }
    Ok(Ending::Done)
}
