//! The append: one transaction that moves the header's count, gives the
//! lease back, puts the exchange and its scope's mark, and carries the
//! turn's tokens and its key's settlement.

use super::header::proposal_attributes;
use super::*;

/// How often an append follows a sequence number that moved under it (a
/// person's note or reply) before it gives up as contended.
pub(super) const SEQUENCE_MOVES: usize = 4;

/// One try of an append: done, or the header's count had moved to this.
pub(super) enum AppendTry {
    Done(Appended),
    Moved(u64),
}

impl DynamoConversations {
    pub(super) async fn append_exchange(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        now_ms: u64,
    ) -> Result<Appended, LedgerError> {
        let mut held = held.clone();
        // How many the conversation held when this turn took it: a person's
        // words appended meanwhile come before it in storage, not before
        // the customer's message (the chaos run's yes invariant reads it).
        let taken_at = held.exchanges;
        // A person's note or reply (contract 18) takes the next sequence
        // number without the lease: the turn's exchange follows it.
        for _ in 0..SEQUENCE_MOVES {
            match self.append_at(lease, &held, new, taken_at, now_ms).await? {
                AppendTry::Done(appended) => return Ok(appended),
                AppendTry::Moved(exchanges) => held.exchanges = exchanges,
            }
        }
        Err(LedgerError::Contended)
    }

    /// An append whose transaction a condition cancelled: the scope's
    /// exchange is there already (the lease is given back), or the lease was lost.
    pub(super) async fn not_appended(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        found: &[Option<Item>],
        mark_at: Option<usize>,
    ) -> Result<AppendTry, LedgerError> {
        if mark_at.is_some_and(|at| found.get(at).is_some_and(Option::is_some)) {
            if held.stored {
                self.release(lease).await?;
            }
            return Ok(AppendTry::Done(Appended::AlreadyThere));
        }
        if held.stored
            && let Some(Some(head)) = found.first()
            && text(head, "lease_writer") == Some(lease.writer.as_str())
            && let Some(exchanges) = number(head, "exchanges").filter(|&n| n != held.exchanges)
        {
            return Ok(AppendTry::Moved(exchanges));
        }
        Err(LedgerError::Conflict("the conversation's lease was lost".into()))
    }

    /// One try of [`ConversationStore::append`] at `held.exchanges`.
    pub(super) async fn append_at(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        taken_at: u64,
        now_ms: u64,
    ) -> Result<AppendTry, LedgerError> {
        let id = lease.id.as_str();
        let seq = held.exchanges;
        // Every item expires when the conversation ends at the latest, so
        // none outlives it by less than its header and none is moved later.
        let ends_by = match held.ends_by_s {
            0 => self.life.ends_by_s(now_ms),
            ends_by => ends_by,
        };
        let mut set = vec![
            "exchanges = :next",
            "updated_at = :now",
            // A turn is the customer's message; a person's words move `updated_at` alone.
            "customer_wrote_at = :now",
            "expires_at = :expires",
            "last_status = :status",
        ];
        let mut header = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(id, HEAD).into_iter().collect()))
            .expression_attribute_values(":next", n(seq + 1))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":expires", n(self.life.expires_s(now_ms, ends_by)))
            .expression_attribute_values(":status", n(u64::from(new.status)));
        let mut condition = if held.stored {
            header = header
                .expression_attribute_values(":seq", n(seq))
                .expression_attribute_values(":writer", s(lease.writer.as_str()));
            "lease_writer = :writer AND exchanges = :seq".to_owned()
        } else {
            // Created with its first exchange: nobody else knew the id.
            set.extend(["customer = :customer", "created_at = :now", "ends_by = :ends_by"]);
            header = header
                .expression_attribute_values(":customer", s(&lease.customer))
                .expression_attribute_values(":ends_by", n(ends_by));
            "attribute_not_exists(pk)".to_owned()
        };
        if let Some(handoff) = &new.handoff {
            // At most one handoff per conversation: it stays with the people.
            condition.push_str(" AND attribute_not_exists(handoff_id)");
            set.extend([
                "handoff_id = :handoff_id",
                "handoff_reason = :handoff_reason",
                "handoff_at = :now",
                "handoff_request_id = :request_id",
                "handoff_open = :open",
            ]);
            header = header
                .expression_attribute_values(":handoff_id", s(&handoff.id))
                .expression_attribute_values(":handoff_reason", s(handoff.reason.as_str()))
                .expression_attribute_values(":request_id", s(lease.writer.invocation()))
                .expression_attribute_values(
                    ":open",
                    s(if new.from_visitor {
                        super::super::schema::HANDOFF_OPEN_VISITOR
                    } else {
                        super::super::schema::HANDOFF_OPEN
                    }),
                );
            if let Some(due_at_ms) = new.handoff_due_at_ms {
                set.push("handoff_due_at = :due_at");
                header = header.expression_attribute_values(":due_at", s(rfc3339(due_at_ms)));
            }
            if let Some(router) = &new.router {
                set.push("handoff_router = :router");
                header = header.expression_attribute_values(":router", s(router));
            }
            if let Some(summary) = &handoff.summary {
                set.push("handoff_summary = :summary");
                header = header.expression_attribute_values(":summary", s(summary));
            }
        }
        if held.stored {
            set.push("lease_ended_by = :writer");
        }
        if let Some(told) = &new.told {
            set.push("handoff_told = :told");
            header = header.expression_attribute_values(":told", s(told));
        }
        // The start of the customer's last message, as kept (masked), for
        // the desk's queue (contract 36): one attribute, no read per item.
        if let Some(words) = new.exchange.customer_message() {
            set.push("customer_last_words = :last_words");
            header = header.expression_attribute_values(":last_words", s(start_of(words)));
        }
        // The writes waiting for the yes (contracts 26 and 28): hashes and times only.
        let kinds: Vec<WriteKind> = crate::tools::write_kinds().collect();
        let mut proposal_sets: Vec<String> = Vec::new();
        let mut proposals_removed: Vec<String> = Vec::new();
        for (kind, step) in new.writes.steps.changes(&kinds) {
            let [hash, at, until] = proposal_attributes(kind);
            match step {
                ProposalStep::Keep => {}
                ProposalStep::Set(proposal) => {
                    header = header
                        .expression_attribute_values(format!(":{hash}"), s(proposal.hex()))
                        .expression_attribute_values(format!(":{at}"), n(proposal.at_ms))
                        .expression_attribute_values(format!(":{until}"), n(proposal.until_ms));
                    proposal_sets.extend([hash, at, until].map(|name| format!("{name} = :{name}")));
                }
                ProposalStep::Clear => proposals_removed.extend([hash, at, until]),
            }
        }
        set.extend(proposal_sets.iter().map(String::as_str));
        let mut remove: Vec<&str> = proposals_removed.iter().map(String::as_str).collect();
        if held.stored {
            // The next lease takes what this turn leaves for its own scope.
            remove.extend(["lease_writer", "lease_until_ms", "proposals_taker"]);
        }
        // A verification asked for is pending until the next exchange (contract 27).
        if new.verifying {
            set.push("verify_pending = :now");
        } else if held.stored {
            remove.push("verify_pending");
        }
        let mut expression = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        // Rule 7: a refund of an order this conversation started a return
        // of (or may have) waits for a person, in every later turn.
        let returns_started: Vec<String> = new
            .writes
            .returns
            .iter()
            .filter(|record| matches!(record.outcome.as_str(), "started" | "unknown"))
            .map(|record| crate::refund::policy::order_key(&record.order_id))
            .collect();
        let mut added = Vec::new();
        if !returns_started.is_empty() {
            added.push("return_orders :return_orders");
            header = header.expression_attribute_values(":return_orders", AttributeValue::Ss(returns_started));
        }
        if new.refund_recorded {
            added.push("refund_records :record");
            header = header.expression_attribute_values(":record", AttributeValue::Ss(vec![new.scope.record_id()]));
            if new.awaiting_approval {
                // Until a decision's note takes it out (`notes`).
                added.push("awaiting :record");
            }
        }
        if !added.is_empty() {
            expression.push_str(&format!(" ADD {}", added.join(", ")));
        }
        let header = header
            .update_expression(expression)
            .condition_expression(condition)
            // What moved it, if it did: a person's note took the sequence number.
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        let put = |sk: String, attributes: Vec<(&str, AttributeValue)>| {
            let mut item: Item = self.key(id, sk).into_iter().collect();
            item.extend(attributes.into_iter().map(|(k, v)| (k.to_owned(), v)));
            item.insert("seq".into(), n(seq));
            item.insert("expires_at".into(), n(ends_by));
            // Every item names its customer, so that forgetting them finds
            // it through the `by_customer` index even after its header went.
            item.insert("customer".into(), s(&lease.customer));
            item.entry("created_at".into()).or_insert_with(|| s(rfc3339(now_ms)));
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(malformed)
        };
        let record_id = new.scope.record_id();
        let mut exchange_attributes = vec![
            ("request_id", s(lease.writer.invocation())),
            ("refund_record", s(&record_id)),
            ("status", n(u64::from(new.status))),
            ("taken_at", n(taken_at)),
            ("created_at", s(rfc3339(now_ms))),
            ("chars", n(new.exchange.chars() as u64)),
            ("messages", s(new.exchange.to_json())),
            (
                "handoff_reason",
                s(new.handoff.as_ref().map(|h| h.reason.as_str()).unwrap_or_default()),
            ),
            ("router", s(new.router.as_deref().unwrap_or_default())),
            // What it did about addresses: orders and outcomes, never an address.
            (
                "address_changes",
                s(serde_json::to_string(&new.writes.addresses).unwrap_or_default()),
            ),
            // What it did about returns: orders, items, reasons, outcomes, never a label's URL.
            (
                "return_records",
                s(serde_json::to_string(&new.writes.returns).unwrap_or_default()),
            ),
        ];
        // The label the customer reads with the turn's reply (contract 28).
        if let Some(label) = &new.label {
            exchange_attributes.push(("label", s(serde_json::to_string(label).unwrap_or_default())));
        }
        let exchange_put = put(exchange_sk(seq), exchange_attributes)?;
        let mut items = vec![
            TransactWriteItem::builder().update(header).build(),
            TransactWriteItem::builder().put(exchange_put).build(),
        ];
        let mark_at = new.marked.then_some(items.len());
        if new.marked {
            let mark = put(format!("{SCOPE_PREFIX}{record_id}"), Vec::new())?;
            items.push(TransactWriteItem::builder().put(mark).build());
        }
        // The orders it named, for the support team's search (contract 30).
        items.extend(super::super::postings::puts(
            &self.table,
            id,
            &lease.customer,
            &new.orders,
            now_ms,
            ends_by,
        )?);
        // What rides with the exchange, in the ledger's table.
        if let Some(tokens) = &new.tokens {
            for update in self.ledger.settlement_updates(tokens)? {
                items.push(TransactWriteItem::builder().update(update).build());
            }
        }
        let mut outcome = Appended::Appended;
        if let Some(settlement) = &new.key {
            items.push(
                TransactWriteItem::builder()
                    .update(self.ledger.settle_update(settlement, now_ms)?)
                    .build(),
            );
            match transact(&self.client, items.iter().cloned()).await? {
                None => return Ok(AppendTry::Done(outcome)),
                // The key's record failed its condition alone: our own retried
                // write had landed, or the key is another request's now.
                Some(found) if found.iter().filter(|f| f.is_some()).count() == 1 => match found.last() {
                    Some(Some(item)) if DynamoLedger::settled_already(settlement, item) => {
                        return Ok(AppendTry::Done(outcome));
                    }
                    Some(Some(_)) => {
                        items.pop();
                        outcome = Appended::KeyNotOurs;
                    }
                    _ => return self.not_appended(lease, held, &found, mark_at).await,
                },
                Some(found) => return self.not_appended(lease, held, &found, mark_at).await,
            }
        }
        match transact(&self.client, items).await? {
            None => Ok(AppendTry::Done(outcome)),
            Some(found) => self.not_appended(lease, held, &found, mark_at).await,
        }
    }
}

/// The first [`LAST_WORDS_CHARS`] characters of a message, with "…" when
/// there were more.
fn start_of(words: &str) -> String {
    let mut start: String = words.chars().take(LAST_WORDS_CHARS).collect();
    if words.chars().nth(LAST_WORDS_CHARS).is_some() {
        start.push('…');
    }
    start
}

/// How much of the customer's last message the queue shows.
const LAST_WORDS_CHARS: usize = 80;
