//! ExecuteBatch (Ferry's own `ferry.v1alpha1.Database`): several statements in one
//! request, in one transaction or one after another (docs/reference/api.md
//! "ExecuteBatch"). What a batch may ask is checked first (plan.rs); then each
//! statement runs exactly as an Execute of the same session would (run.rs), the
//! session threading from one to the next.
mod condition;
mod plan;
mod run;
pub mod settings;

pub use run::{run, run_keyed, Ended};
