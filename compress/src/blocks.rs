//! Input that arrives in pieces, cut into the fixed-size blocks a block codec (snappy's
//! framing format, S2) compresses one at a time, so a stream written piece by piece
//! has the blocks — and bytes — of the input written whole.

pub(crate) struct Blocks {
    size: usize,
    /// The start of the next block.
    pending: Vec<u8>,
}

impl Blocks {
    pub(crate) fn new(size: usize) -> Self {
        Blocks {
            size,
            pending: Vec::new(),
        }
    }

    /// Hands every block `input` completes to `emit`, whole blocks straight from the
    /// input; a partial block waits for the next piece.
    pub(crate) fn feed(&mut self, mut input: &[u8], mut emit: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            let room = self.size.saturating_sub(self.pending.len());
            let (head, rest) = input.split_at_checked(room).unwrap_or((input, &[]));
            self.pending.extend_from_slice(head);
            input = rest;
            if self.pending.len() < self.size {
                return;
            }
            emit(&self.pending);
            self.pending.clear();
        }
        while let Some((block, rest)) = input.split_at_checked(self.size) {
            emit(block);
            input = rest;
        }
        self.pending.extend_from_slice(input);
    }

    /// The last, partial block (empty if the input ended on a block's end).
    pub(crate) fn rest(&self) -> &[u8] {
        &self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_become_the_blocks_of_the_whole() {
        let input: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        for piece in [1, 7, 99, 100, 101, 1000] {
            let mut blocks = Blocks::new(100);
            let mut got = Vec::new();
            for chunk in input.chunks(piece) {
                blocks.feed(chunk, |b| got.push(b.to_vec()));
            }
            if !blocks.rest().is_empty() {
                got.push(blocks.rest().to_vec());
            }
            let want: Vec<Vec<u8>> = input.chunks(100).map(<[u8]>::to_vec).collect();
            assert_eq!(got, want, "{piece}-byte pieces");
        }
    }
}
