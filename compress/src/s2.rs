//! S2 (klauspost/compress) stream format: written by the S2 helper.
