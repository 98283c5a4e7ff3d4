//! MySQL types to vitess types and back: the column type map, the table
//! column types looked up in information_schema, and typed bind variables.
pub mod bind;
pub mod column_types;
pub mod type_map;
