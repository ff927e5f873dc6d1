//! The rules link names and address object tags share.

/// The first of the shared rules a word breaks ([`check_word`]).
pub(crate) enum WordFault {
    /// It is empty.
    Empty,
    /// It is `len` bytes long, more than allowed.
    TooLong { len: usize },
    /// Character `ch` at `pos` is not an ASCII letter, digit or `_` (every
    /// character before it is ASCII: `pos` is both its byte offset and its
    /// index).
    BadChar { pos: usize, ch: char },
    /// It does not start with an ASCII letter.
    BadStart,
}

/// Checks `word` against the rules link names and tags share, in this
/// order: not empty, at most `max` bytes, only ASCII letters, digits and
/// `_`, a letter first.
pub(crate) fn check_word(word: &str, max: usize) -> Result<(), WordFault> {
    if word.is_empty() {
        return Err(WordFault::Empty);
    }
    if word.len() > max {
        return Err(WordFault::TooLong { len: word.len() });
    }
    if let Some((pos, ch)) =
        word.char_indices().find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
    {
        return Err(WordFault::BadChar { pos, ch });
    }
    if !word.as_bytes()[0].is_ascii_alphabetic() {
        return Err(WordFault::BadStart);
    }
    Ok(())
}
