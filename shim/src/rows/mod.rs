//! Where a statement's rows go: kept for one answer, sent on in chunks, or
//! spilled in pieces once an answer grows large; and their encoding.
pub mod answer;
pub mod binary_row;
pub mod gone;
pub mod result;
pub mod sink;
pub mod spill;
