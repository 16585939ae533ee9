//! `unknown`: refunds whose outcome is not known (state unknown, or
//! executing for longer than the function's timeout), to check with payments.

use refund_chat::staff::Staff;

use crate::print::{print_table, row};
use crate::{Ending, Outcome};

pub async fn run(staff: &Staff) -> Outcome {
    // The same list as the desk's queue shows.
    let records = refund_chat::staff::read::unknown_outcomes(staff).await?;
    if records.is_empty() {
        println!("no refunds with an unknown outcome");
        return Ok(Ending::Done);
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let why = r.failure.clone().unwrap_or_else(|| "no outcome recorded".to_owned());
            row(r, [r.state.to_string(), why])
        })
        .collect();
    print_table(
        &["ID", "CREATED (UTC)", "CUSTOMER", "ORDER", "AMOUNT", "STATE", "WHY"],
        &rows,
    );
    Ok(Ending::Done)
}
