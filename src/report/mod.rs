//! Turning results into text for people (a table) and machines (JSON lines). Knows nothing of
//! how results were measured.

pub(crate) mod table;
