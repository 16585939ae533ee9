//! The tables' schemas (the ledger's and the conversations'), in one place. [`create_table`] builds it (for
//! local stacks and tests: moto), and `tests/template.rs` checks that
//! `template.yaml`'s table is [`cloudformation`]'s, so the deployed table,
//! the local one and the code's expectations cannot drift apart.

use aws_sdk_dynamodb::Client;
use serde_json::{Value, json};

use super::unavailable;
use crate::ledger::LedgerError;

/// The table's one key: a string partition key, no sort key.
pub const PARTITION_KEY: &str = "pk";

/// The sparse index of refund records that wait for someone: hash key
/// `waiting_for` (`awaiting_approval`, `executing`, `unknown`: the states
/// that need a person or an outcome), range key `created_at`. The attribute
/// is removed when a record reaches a final state.
pub const WAITING_INDEX: &str = "waiting";
pub const WAITING_HASH_KEY: &str = "waiting_for";
pub const WAITING_RANGE_KEY: &str = "created_at";

/// DynamoDB's TTL attribute (epoch seconds): request records and guards
/// carry it, refund records never do.
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// The conversation table's keys: partition key `pk` (the id), sort key `sk`.
pub const CONVERSATION_SORT_KEY: &str = "sk";
/// A conversation's header item's sort key.
pub const CONVERSATION_HEAD: &str = "head";
/// An exchange's sort key: this, then its sequence number in 6 digits.
pub const EXCHANGE_PREFIX: &str = "x#";
/// A person's verdict on a conversation (contract 21): `v#<ms>#<by>`.
pub const VERDICT_PREFIX: &str = "v#";
/// A person's click that appended a reply: `k#<hash of who and key>`,
/// holding the exchange's `seq`, so the same click never appends twice.
pub const CLICK_PREFIX: &str = "k#";

/// The sort key of a conversation's exchange `seq`.
pub fn exchange_sk(seq: u64) -> String {
    format!("{EXCHANGE_PREFIX}{seq:06}")
}

/// A customer's conversation items by customer (keys only): what "forget"
/// reads. Every item of a conversation carries `customer`, so an exchange
/// whose header TTL removed first is still found.
pub const BY_CUSTOMER_INDEX: &str = "by_customer";
pub const BY_CUSTOMER_HASH_KEY: &str = "customer";
pub const BY_CUSTOMER_RANGE_KEY: &str = "created_at";

/// The open handoffs, oldest first (contract 12): hash key `handoff_open`
/// (`open`, or `visitor` for a visitor's; removed when a person closes
/// it), range key `handoff_at`. Only
/// an open handoff's header carries it, so `handoffs` never scans.
pub const OPEN_HANDOFFS_INDEX: &str = "open_handoffs";
/// `handoff_open` of a customer's or a guest's open handoff.
pub const HANDOFF_OPEN: &str = "open";
/// `handoff_open` of a visitor's (contract 30): the queue reads them apart,
/// so visitors' handoffs never push a customer's off the page.
pub const HANDOFF_OPEN_VISITOR: &str = "visitor";
pub const OPEN_HANDOFFS_HASH_KEY: &str = "handoff_open";
pub const OPEN_HANDOFFS_RANGE_KEY: &str = "handoff_at";

/// A sparse index: its name, hash key, range key and projection.
type Index = (&'static str, &'static str, &'static str, &'static str);

/// A table's shape: what both the CloudFormation form and [`create`] are made from.
struct Shape {
    sort_key: Option<&'static str>,
    indexes: &'static [Index],
}

const LEDGER: Shape = Shape {
    sort_key: None,
    indexes: &[(WAITING_INDEX, WAITING_HASH_KEY, WAITING_RANGE_KEY, "ALL")],
};

const CONVERSATIONS: Shape = Shape {
    sort_key: Some(CONVERSATION_SORT_KEY),
    indexes: &[
        (
            BY_CUSTOMER_INDEX,
            BY_CUSTOMER_HASH_KEY,
            BY_CUSTOMER_RANGE_KEY,
            "KEYS_ONLY",
        ),
        (
            OPEN_HANDOFFS_INDEX,
            OPEN_HANDOFFS_HASH_KEY,
            OPEN_HANDOFFS_RANGE_KEY,
            "ALL",
        ),
    ],
};

impl Shape {
    fn attributes(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = [Some(PARTITION_KEY), self.sort_key].into_iter().flatten().collect();
        for (_, hash, range, _) in self.indexes {
            for name in [*hash, *range] {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }

    fn cloudformation(&self) -> Value {
        let attributes: Vec<Value> = self
            .attributes()
            .into_iter()
            .map(|name| json!({"AttributeName": name, "AttributeType": "S"}))
            .collect();
        let mut key = vec![json!({"AttributeName": PARTITION_KEY, "KeyType": "HASH"})];
        if let Some(sort_key) = self.sort_key {
            key.push(json!({"AttributeName": sort_key, "KeyType": "RANGE"}));
        }
        let indexes: Vec<Value> = self
            .indexes
            .iter()
            .map(|(index, hash, range, projection)| {
                json!({
                    "IndexName": index,
                    "KeySchema": [
                        {"AttributeName": hash, "KeyType": "HASH"},
                        {"AttributeName": range, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": projection},
                })
            })
            .collect();
        json!({
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": attributes,
            "KeySchema": key,
            "GlobalSecondaryIndexes": indexes,
            "TimeToLiveSpecification": {"AttributeName": TTL_ATTRIBUTE, "Enabled": true},
        })
    }

    async fn create(&self, client: &Client, name: &str) -> Result<(), LedgerError> {
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
            ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
        };
        let malformed = |error: aws_sdk_dynamodb::error::BuildError| LedgerError::Malformed(error.to_string());
        let attribute = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(malformed)
        };
        let key = |name: &str, kind: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .map_err(malformed)
        };
        let mut table = client
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(key(PARTITION_KEY, KeyType::Hash)?);
        for (index, hash, range, projection) in self.indexes {
            let index = GlobalSecondaryIndex::builder()
                .index_name(*index)
                .key_schema(key(hash, KeyType::Hash)?)
                .key_schema(key(range, KeyType::Range)?)
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(*projection))
                        .build(),
                )
                .build()
                .map_err(malformed)?;
            table = table.global_secondary_indexes(index);
        }
        if let Some(sort_key) = self.sort_key {
            table = table.key_schema(key(sort_key, KeyType::Range)?);
        }
        for name in self.attributes() {
            table = table.attribute_definitions(attribute(name)?);
        }
        table.send().await.map_err(unavailable)?;
        let ttl = TimeToLiveSpecification::builder()
            .attribute_name(TTL_ATTRIBUTE)
            .enabled(true)
            .build()
            .map_err(malformed)?;
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(ttl)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

/// The ledger table as CloudFormation describes it: the properties of
/// `template.yaml`'s `RefundLedger` that define its shape.
pub fn cloudformation() -> Value {
    LEDGER.cloudformation()
}

/// The conversation table as CloudFormation describes it (`template.yaml`'s
/// `ConversationTable`).
pub fn conversations_cloudformation() -> Value {
    CONVERSATIONS.cloudformation()
}

/// Creates the ledger table as [`cloudformation`] describes it, TTL included.
pub async fn create_table(client: &Client, name: &str) -> Result<(), LedgerError> {
    LEDGER.create(client, name).await
}

/// Creates the conversation table as [`conversations_cloudformation`] describes it.
pub async fn create_conversation_table(client: &Client, name: &str) -> Result<(), LedgerError> {
    CONVERSATIONS.create(client, name).await
}

/// A person's internal note on a conversation (contract 30):
/// `n#<click>`, where the click is the desk's hash of who and its key (a
/// terminal's: of who and when), so the same click keeps one note. Kept in
/// the partition [`internal_notes_pk`] of the conversation, out of the
/// customer function's reach (notes kept before lie in the conversation's
/// own partition, and are read there too).
pub const INTERNAL_NOTE_PREFIX: &str = "n#";

/// The partition of a conversation's internal notes.
pub const INTERNAL_NOTES_PARTITION: &str = "staff-notes#";

pub fn internal_notes_pk(conversation: &str) -> String {
    format!("{INTERNAL_NOTES_PARTITION}{conversation}")
}

/// The partitions of the conversation table that only the staff function
/// reads or writes, as IAM's `dynamodb:LeadingKeys` patterns: the
/// template denies every one to the customer function's role (contract 30;
/// `tests/template.rs` checks it against this list).
pub const STAFF_ONLY_KEYS: [&str; 2] = ["staff-notes#*", SAVED_REPLIES_PARTITION];

/// The shop's saved replies (contract 30) share the conversation table, in
/// a partition of their own that no conversation id can name (those are
/// `c_…`): `r#<id>` per reply, and [`SAVED_REPLIES_COUNT`] holding the ids
/// in use, so at most [`crate::staff::saved_replies::MAX_SAVED_REPLIES`]
/// exist however many approvers add one at once.
pub const SAVED_REPLIES_PARTITION: &str = "saved-replies";
pub const SAVED_REPLY_PREFIX: &str = "r#";
pub const SAVED_REPLIES_COUNT: &str = "count";
