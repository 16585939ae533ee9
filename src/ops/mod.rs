//! Operating the function: its log lines ([`logging`]) and the summary line
//! and metrics of every request ([`telemetry`]).

pub mod logging;
pub mod telemetry;
