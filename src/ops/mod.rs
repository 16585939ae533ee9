//! Operating the function: its log lines ([`logging`]), the summary line
//! and metrics of every request ([`telemetry`]), and the events people act
//! on, derived from the tables' writes ([`events`]).

pub mod events;
pub mod logging;
pub mod runtime;
pub mod telemetry;
