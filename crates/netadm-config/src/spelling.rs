//! Small enums spelled as one word in the files and on the command line:
//! each value with its spelling in one table, read both ways.

/// The spelling of every value of an enum `T`, and how a word that is none
/// of them is refused.
pub(crate) struct Spellings<T: 'static> {
    /// What the words name, e.g. "address type".
    pub what: &'static str,
    /// The words an error lists as expected, e.g. "static, dhcp or addrconf".
    pub expected: &'static str,
    /// Every value and its spelling.
    pub words: &'static [(T, &'static str)],
}

impl<T: Copy + PartialEq> Spellings<T> {
    /// How `v` is spelled.
    pub fn of(&self, v: T) -> &'static str {
        self.words.iter().find(|(x, _)| *x == v).map(|(_, s)| *s).expect("every value is spelled")
    }

    /// The value spelled exactly `s`; else an error naming `s` and what
    /// was expected.
    pub fn parse(&self, s: &str) -> Result<T, String> {
        self.words
            .iter()
            .find(|(_, w)| *w == s)
            .map(|(v, _)| *v)
            .ok_or_else(|| format!("{} {s:?}: expected {}", self.what, self.expected))
    }
}
