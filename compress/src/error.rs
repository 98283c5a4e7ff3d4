//! Why a body could not be decompressed.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecompressError {
    /// The output would exceed `limit` bytes; decoding stopped there (nothing past the
    /// limit was allocated).
    TooLarge { limit: usize },
    /// The input is not valid for its codec.
    Corrupt(String),
}

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecompressError::TooLarge { limit } => {
                write!(f, "decompressed size exceeds the {limit}-byte limit")
            }
            DecompressError::Corrupt(why) => write!(f, "corrupt compressed data: {why}"),
        }
    }
}

impl std::error::Error for DecompressError {}
