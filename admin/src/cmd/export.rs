//! `export [--since DATE] [--format json|csv]`: every refund record, the
//! audit trail, to stdout: exact in JSON, spreadsheet-safe in CSV. Each
//! record ends with the person's verdict on its conversation (contract 21:
//! the last `--intent` a person gave), beside the router's labels.

use std::io::Write;

use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::ledger::{LedgerError, RefundRecord};
use refund_chat::untrusted;

use crate::{Ending, Format, Outcome};

/// The last column, after [`RefundRecord::COLUMNS`].
pub const VERDICT_COLUMN: &str = "verdict";

/// Each record's fields as text, its verdict last (empty where none).
async fn rows(conversations: &DynamoConversations, records: &[RefundRecord]) -> Result<Vec<Vec<String>>, LedgerError> {
    let mut verdicts: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut rows = Vec::with_capacity(records.len());
    for record in records {
        let verdict = match &record.conversation_id {
            Some(conversation) => match verdicts.get(conversation) {
                Some(known) => known.clone(),
                None => {
                    let found = conversations
                        .routing_of(conversation)
                        .await?
                        .and_then(|routed| routed.verdict)
                        .map(|intent| intent.as_str().to_owned())
                        .unwrap_or_default();
                    verdicts.insert(conversation.clone(), found.clone());
                    found
                }
            },
            None => String::new(),
        };
        rows.push(record.values().into_iter().chain([verdict]).collect());
    }
    Ok(rows)
}

pub async fn run(ledger: &DynamoLedger, conversations: &DynamoConversations, since_ms: u64, format: Format) -> Outcome {
    let records = ledger.all_refunds(since_ms).await?;
    let rows = rows(conversations, &records).await?;
    let columns: Vec<&str> = RefundRecord::COLUMNS.iter().copied().chain([VERDICT_COLUMN]).collect();
    let mut out = std::io::stdout().lock();
    let written = match format {
        Format::Json => write_json(&mut out, &columns, &rows).map_err(|e| e.to_string()),
        Format::Csv => {
            let mut csv = csv::Writer::from_writer(&mut out);
            let cells = |row: &Vec<String>| {
                row.iter()
                    .map(|v| untrusted::spreadsheet_cell(v).into_owned())
                    .collect::<Vec<_>>()
            };
            std::iter::once(csv.write_record(&columns))
                .chain(rows.iter().map(|row| csv.write_record(cells(row))))
                .collect::<Result<(), _>>()
                .and_then(|()| csv.flush().map_err(csv::Error::from))
                .map_err(|e| e.to_string())
        }
    };
    Ok(match written {
        Ok(()) => Ending::Done,
        Err(error) => Ending::Failed(format!("writing the export: {error}")),
    })
}

/// The export as a JSON array, one record a line. Exact: every string is
/// the stored one. serde_json leaves DEL, C1 controls and bidirectional
/// overrides raw, and those act on a terminal, so they are written as
/// `\uXXXX` escapes, which JSON reads back as the same characters.
fn write_json(out: &mut impl Write, columns: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    struct TerminalSafe;
    impl serde_json::ser::Formatter for TerminalSafe {
        fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> std::io::Result<()> {
            let mut start = 0;
            for (at, c) in fragment.char_indices() {
                if untrusted::acts_on_a_terminal(c) {
                    writer.write_all(&fragment.as_bytes()[start..at])?;
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        write!(writer, "\\u{unit:04x}")?;
                    }
                    start = at + c.len_utf8();
                }
            }
            writer.write_all(&fragment.as_bytes()[start..])
        }
    }
    writeln!(out, "[")?;
    for (i, row) in rows.iter().enumerate() {
        let object: serde_json::Map<String, serde_json::Value> = columns
            .iter()
            .zip(row)
            .filter(|(_, value)| !value.is_empty())
            .map(|(column, value)| (column.to_string(), serde_json::Value::String(value.clone())))
            .collect();
        write!(out, "  ")?;
        serde::Serialize::serialize(
            &object,
            &mut serde_json::Serializer::with_formatter(&mut *out, TerminalSafe),
        )
        .map_err(std::io::Error::other)?;
        writeln!(out, "{}", if i + 1 < rows.len() { "," } else { "" })?;
    }
    writeln!(out, "]")
}
