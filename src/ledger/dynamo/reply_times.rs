//! When a person first answered a handoff (contract 32), kept so that the
//! reply time a customer is told is one small read, never a scan.
//!
//! | item | `pk` | `sk` | attributes |
//! | --- | --- | --- | --- |
//! | a conversation's header | the conversation | `head` | `handoff_due_at` (RFC 3339, written with the handoff), `handoff_first_reply_at` (RFC 3339: the first person's reply, decision or close) |
//! | the recent first replies | `reply_times` | `stats` | `replies`: the newest [`KEPT`] as `"<handoff ms>:<first reply ms>:<1 when it began within hours, else 0>"`, oldest first |
//!
//! The first reply is one conditional write (`attribute_not_exists`), so of
//! two people acting at once one clock ends and one time is kept. The list
//! is appended to (`list_append`) and trimmed by a rewrite conditional on
//! its length, which a concurrent append makes fail harmlessly (the next
//! first reply trims). A reply time names no customer and no conversation.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, Update};

use super::schema::{CONVERSATION_HEAD as HEAD, CONVERSATION_SORT_KEY as SORT_KEY};
use super::{DynamoClient, Item, malformed, n, s, text, unavailable, update_item};
use crate::clock::rfc3339;
use crate::ledger::LedgerError;
use crate::office_hours::expected::FirstReply;

/// The item of the recent first replies.
pub const REPLY_TIMES: &str = "reply_times";
/// The most first replies kept: a week of a busy desk's median, in one item
/// of a few kilobytes.
pub const KEPT: usize = 500;

/// Its sort key: no conversation's header (`head`) nor anything of one, and
/// no `expires_at`, so no read of conversations finds it.
const STATS: &str = "stats";

fn key(pk: &str, sk: &str) -> std::collections::HashMap<String, AttributeValue> {
    [("pk".to_owned(), s(pk)), (SORT_KEY.to_owned(), s(sk))]
        .into_iter()
        .collect()
}

/// Ends the clock of conversation `id`'s handoff at `now_ms`, if it runs:
/// the handoff's time (ms) when this was its first reply; none when it was
/// not (no handoff, or answered before).
pub async fn first_reply(
    client: &DynamoClient,
    table: &str,
    id: &str,
    now_ms: u64,
) -> Result<Option<u64>, LedgerError> {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key(id, HEAD)))
        .update_expression("SET handoff_first_reply_at = :now")
        .condition_expression("attribute_exists(handoff_id) AND attribute_not_exists(handoff_first_reply_at)")
        .expression_attribute_values(":now", s(rfc3339(now_ms)))
        .build()
        .map_err(malformed)?;
    Ok(match update_item(client, &update, ReturnValue::AllNew).await? {
        Ok(head) => text(&head, "handoff_at").and_then(crate::clock::parse_utc),
        Err(_) => None,
    })
}

/// Keeps a first reply, trimming the list to the newest [`KEPT`].
pub async fn keep(client: &DynamoClient, table: &str, reply: &FirstReply) -> Result<(), LedgerError> {
    let one = AttributeValue::L(vec![s(format!(
        "{}:{}:{}",
        reply.begun_ms,
        reply.replied_ms,
        u8::from(reply.within_hours)
    ))]);
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key(REPLY_TIMES, STATS)))
        .update_expression("SET replies = list_append(if_not_exists(replies, :none), :one)")
        .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
        .expression_attribute_values(":one", one)
        .build()
        .map_err(malformed)?;
    let Ok(now) = update_item(client, &update, ReturnValue::UpdatedNew).await? else {
        return Ok(());
    };
    let Some(AttributeValue::L(replies)) = now.get("replies") else {
        return Ok(());
    };
    if replies.len() <= KEPT {
        return Ok(());
    }
    let newest = replies[replies.len() - KEPT..].to_vec();
    let trim = Update::builder()
        .table_name(table)
        .set_key(Some(key(REPLY_TIMES, STATS)))
        .update_expression("SET replies = :newest")
        .condition_expression("size(replies) = :seen")
        .expression_attribute_values(":newest", AttributeValue::L(newest))
        .expression_attribute_values(":seen", n(replies.len() as u64))
        .build()
        .map_err(malformed)?;
    // Lost to a concurrent append: the next first reply trims.
    let _ = update_item(client, &trim, ReturnValue::None).await?;
    Ok(())
}

/// The recent first replies, oldest first: a Query of the one item, the
/// action the customers' function's role has on this table (it has no
/// `GetItem` there, and needs none but this).
pub async fn recent(client: &DynamoClient, table: &str) -> Result<Vec<FirstReply>, LedgerError> {
    let item: Item = client
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk AND #sk = :sk")
        .expression_attribute_names("#sk", SORT_KEY)
        .expression_attribute_values(":pk", s(REPLY_TIMES))
        .expression_attribute_values(":sk", s(STATS))
        .projection_expression("replies")
        .send()
        .await
        .map_err(unavailable)?
        .items
        .and_then(|items| items.into_iter().next())
        .unwrap_or_default();
    Ok(match item.get("replies") {
        Some(AttributeValue::L(replies)) => replies.iter().filter_map(|reply| parse(reply.as_s().ok()?)).collect(),
        _ => Vec::new(),
    })
}

fn parse(kept: &str) -> Option<FirstReply> {
    let mut parts = kept.split(':');
    let reply = FirstReply {
        begun_ms: parts.next()?.parse().ok()?,
        replied_ms: parts.next()?.parse().ok()?,
        within_hours: parts.next()? == "1",
    };
    parts.next().is_none().then_some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_back() {
        assert_eq!(
            parse("1000:61000:1"),
            Some(FirstReply {
                begun_ms: 1000,
                replied_ms: 61000,
                within_hours: true
            })
        );
        assert_eq!(parse("1000:61000:0").map(|reply| reply.within_hours), Some(false));
        for malformed in ["x:1:1", "1:2", "1:2:1:4"] {
            assert_eq!(parse(malformed), None, "{malformed}");
        }
    }
}
