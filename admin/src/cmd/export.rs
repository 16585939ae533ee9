//! `export [--since DATE] [--format json|csv]`: every refund record, the
//! audit trail, to stdout: exact in JSON, spreadsheet-safe in CSV.

use std::io::Write;

use refund_chat::ledger::RefundRecord;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::untrusted;

use crate::{Ending, Format, Outcome};

pub async fn run(ledger: &DynamoLedger, since_ms: u64, format: Format) -> Outcome {
    let records = ledger.all_refunds(since_ms).await?;
    let mut out = std::io::stdout().lock();
    let written = match format {
        Format::Json => write_json(&mut out, &records).map_err(|e| e.to_string()),
        Format::Csv => {
            let mut csv = csv::Writer::from_writer(&mut out);
            let cells = |record: &RefundRecord| record.values().map(|v| untrusted::spreadsheet_cell(&v).into_owned());
            std::iter::once(csv.write_record(RefundRecord::COLUMNS))
                .chain(records.iter().map(|record| csv.write_record(cells(record))))
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
fn write_json(out: &mut impl Write, records: &[RefundRecord]) -> std::io::Result<()> {
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
    for (i, record) in records.iter().enumerate() {
        let object: serde_json::Map<String, serde_json::Value> = RefundRecord::COLUMNS
            .iter()
            .zip(record.values())
            .filter(|(_, value)| !value.is_empty())
            .map(|(column, value)| (column.to_string(), serde_json::Value::String(value)))
            .collect();
        write!(out, "  ")?;
        serde::Serialize::serialize(
            &object,
            &mut serde_json::Serializer::with_formatter(&mut *out, TerminalSafe),
        )
        .map_err(std::io::Error::other)?;
        writeln!(out, "{}", if i + 1 < records.len() { "," } else { "" })?;
    }
    writeln!(out, "]")
}
