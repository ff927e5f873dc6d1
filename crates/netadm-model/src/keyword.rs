//! Shared parsing of small keyword enums (`phys`, `active`, `L2`, ...).

/// A keyword (link class, LACP mode, ...) was not one of the accepted words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {input:?}: expected one of {}", choices.join(", "))]
pub struct KeywordError {
    /// What was being parsed, e.g. "link class".
    pub what: &'static str,
    /// The rejected input, verbatim.
    pub input: String,
    /// The accepted spellings (matched ASCII case-insensitively).
    pub choices: &'static [&'static str],
}

/// Looks `input` up case-insensitively in `table` (canonical spelling, value).
pub(crate) fn parse_keyword<T: Copy>(
    what: &'static str,
    input: &str,
    choices: &'static [&'static str],
    values: &[T],
) -> Result<T, KeywordError> {
    debug_assert_eq!(choices.len(), values.len());
    choices
        .iter()
        .position(|c| c.eq_ignore_ascii_case(input))
        .map(|i| values[i])
        .ok_or_else(|| KeywordError { what, input: input.to_owned(), choices })
}
