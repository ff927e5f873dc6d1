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

/// Declares keyword enums, each value with its spelling: for each, the
/// enum (`Copy`, ordered, hashable), `ALL` (every value, in the order
/// declared), `as_str`, and `Display` (the spelling); with `parse "what"`
/// also `FromStr`, matching the spellings ASCII case-insensitively
/// ([`KeywordError`] naming `what`). The values are the enum's
/// discriminants `0..`, which index the spellings.
macro_rules! keywords {
    ($(
        $(#[$meta:meta])*
        pub enum $name:ident $(parse $what:literal)? {
            $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+
        }
    )+) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in the order declared.
            pub const ALL: [$name; [$($word),+].len()] = [$($name::$variant),+];
            const NAMES: [&'static str; [$($word),+].len()] = [$($word),+];

            #[doc = concat!("How it is spelled: one of", $(" `", $word, "`",)+ ".")]
            pub fn as_str(self) -> &'static str {
                Self::NAMES[self as usize]
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        $(impl std::str::FromStr for $name {
            type Err = $crate::keyword::KeywordError;
            /// Any of its spellings, ASCII case-insensitively.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $crate::keyword::parse_keyword($what, s, &Self::NAMES, &Self::ALL)
            }
        })?
    )+};
}
