//! The ledger table's schema, in one place. [`create_table`] builds it (for
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

/// The table as CloudFormation describes it: the properties of
/// `template.yaml`'s `RefundLedger` that define its shape.
pub fn cloudformation() -> Value {
    let attributes: Vec<Value> = [PARTITION_KEY, WAITING_HASH_KEY, WAITING_RANGE_KEY]
        .map(|name| json!({"AttributeName": name, "AttributeType": "S"}))
        .into();
    json!({
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": attributes,
        "KeySchema": [{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [{
            "IndexName": WAITING_INDEX,
            "KeySchema": [
                {"AttributeName": WAITING_HASH_KEY, "KeyType": "HASH"},
                {"AttributeName": WAITING_RANGE_KEY, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }],
        "TimeToLiveSpecification": {"AttributeName": TTL_ATTRIBUTE, "Enabled": true},
    })
}

/// Creates the table as [`cloudformation`] describes it, TTL included.
pub async fn create_table(client: &Client, name: &str) -> Result<(), LedgerError> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
        ScalarAttributeType, TimeToLiveSpecification,
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
    let waiting = GlobalSecondaryIndex::builder()
        .index_name(WAITING_INDEX)
        .key_schema(key(WAITING_HASH_KEY, KeyType::Hash)?)
        .key_schema(key(WAITING_RANGE_KEY, KeyType::Range)?)
        .projection(Projection::builder().projection_type(ProjectionType::All).build())
        .build()
        .map_err(malformed)?;
    client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(PARTITION_KEY)?)
        .attribute_definitions(attribute(WAITING_HASH_KEY)?)
        .attribute_definitions(attribute(WAITING_RANGE_KEY)?)
        .key_schema(key(PARTITION_KEY, KeyType::Hash)?)
        .global_secondary_indexes(waiting)
        .send()
        .await
        .map_err(unavailable)?;
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
