//! The header and its lease: one turn at a time, taken and given back in
//! one conditional update, and the proposals the header keeps.

use super::*;

/// The refund records a conversation's turns wrote, from its header, sorted.
pub(super) fn refund_records_of(head: &Item) -> Vec<String> {
    let mut records: Vec<String> = head
        .get("refund_records")
        .and_then(|v| v.as_ss().ok())
        .cloned()
        .unwrap_or_default();
    records.sort();
    records
}

impl DynamoConversations {
    pub(super) async fn begin_lease(
        &self,
        lease: &ConversationLease,
        may_create: bool,
        now_ms: u64,
    ) -> Result<Begun, LedgerError> {
        // A writer whose lease ended never takes it again: an attempt of its
        // own `begin` that the SDK gave up on may land after its turn ended.
        let live = "customer = :customer AND expires_at > :now_s \
                    AND (attribute_not_exists(lease_until_ms) OR lease_until_ms < :now_ms OR lease_writer = :writer) \
                    AND (attribute_not_exists(lease_ended_by) OR lease_ended_by <> :writer)";
        let condition = if may_create {
            format!("attribute_not_exists(pk) OR ({live})")
        } else {
            live.to_owned()
        };
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(lease.id.as_str(), HEAD).into_iter().collect()))
            .update_expression(
                "SET lease_writer = :writer, lease_until_ms = :until, customer = if_not_exists(customer, :customer), \
                 created_at = if_not_exists(created_at, :now), updated_at = if_not_exists(updated_at, :now), \
                 exchanges = if_not_exists(exchanges, :zero), expires_at = if_not_exists(expires_at, :expires), \
                 ends_by = if_not_exists(ends_by, :ends_by), \
                 proposals_taker = if_not_exists(proposals_taker, :scope)",
            )
            .condition_expression(condition)
            .expression_attribute_values(":writer", s(lease.writer.as_str()))
            .expression_attribute_values(":until", n(lease.lease_until_ms))
            .expression_attribute_values(":scope", s(&lease.scope))
            .expression_attribute_values(":customer", s(&lease.customer))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":expires", n(self.life.expires_s(now_ms, self.life.ends_by_s(now_ms))))
            .expression_attribute_values(":ends_by", n(self.life.ends_by_s(now_ms)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .expression_attribute_values(":now_ms", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        match update_item(&self.client, &update, ReturnValue::AllNew).await? {
            Ok(item) => {
                let last_status = number(&item, "last_status").unwrap_or_default();
                Ok(Begun::Held(HeldConversation {
                    exchanges: number(&item, "exchanges").unwrap_or_default(),
                    ends_by_s: number(&item, "ends_by").unwrap_or_default(),
                    handed_off: item.contains_key("handoff_id"),
                    last_failed: matches!(last_status, 502 | 504),
                    stored: true,
                    // Taken in this very write by the first scope to lease
                    // it since they were proposed: no other scope's.
                    proposals: if text(&item, "proposals_taker") == Some(lease.scope.as_str()) {
                        stored_proposals(&item)
                    } else {
                        Proposals::default()
                    },
                    returns_started: item
                        .get("return_orders")
                        .and_then(|orders| orders.as_ss().ok())
                        .cloned()
                        .unwrap_or_default(),
                    verifying: item.contains_key("verify_pending"),
                    handoff_told: text(&item, "handoff_told").map(str::to_owned),
                }))
            }
            Err(found) => {
                let live = text(&found, "customer") == Some(lease.customer.as_str())
                    && number(&found, "expires_at").is_some_and(|at| at > now_ms / 1000);
                Ok(if live {
                    Begun::Busy {
                        lease_until_ms: number(&found, "lease_until_ms").unwrap_or(now_ms),
                    }
                } else {
                    Begun::NotFound
                })
            }
        }
    }

    pub(super) async fn release_lease(&self, lease: &ConversationLease) -> Result<(), LedgerError> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(lease.id.as_str(), HEAD).into_iter().collect()))
            .update_expression("SET lease_ended_by = :writer REMOVE lease_writer, lease_until_ms")
            .condition_expression("lease_writer = :writer")
            .expression_attribute_values(":writer", s(lease.writer.as_str()))
            .build()
            .map_err(malformed)?;
        // A condition that fails: not ours (any more), nothing to give back.
        update_alone(&self.client, update).await.map(|_| ())
    }
}

/// What a person's words (a reply, a decision's note, a close) remove from
/// the header: every proposal of every kind, since the customer's next
/// message may answer the person (contract 26: "next" is literal). An
/// internal note, which the customer never sees, removes nothing.
pub(crate) fn proposals_ended() -> String {
    crate::tools::write_kinds()
        .flat_map(proposal_attributes)
        .chain(["proposals_taker".to_owned()])
        .collect::<Vec<_>>()
        .join(", ")
}

/// A kind's proposal attributes on the conversation's header (its hash,
/// when it was made and until when it waits), named after the kind.
pub(super) fn proposal_attributes(kind: WriteKind) -> [String; 3] {
    let name = kind.as_str();
    [
        format!("{name}_proposal"),
        format!("{name}_proposal_at"),
        format!("{name}_proposal_until"),
    ]
}

/// The proposals a conversation's header holds, of every kind the agent
/// may write.
pub(super) fn stored_proposals(item: &Item) -> Proposals {
    let mut proposals = Proposals::default();
    for kind in crate::tools::write_kinds() {
        let [hash, at, until] = proposal_attributes(kind);
        let proposal = text(item, &hash).and_then(|hex| {
            Proposal::from_stored(
                hex,
                number(item, &at).unwrap_or_default(),
                number(item, &until).unwrap_or_default(),
            )
        });
        proposals.set(kind, proposal);
    }
    proposals
}
