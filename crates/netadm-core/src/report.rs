//! What the core answers: a verb's report (its phases, counts and notes),
//! the history of recent verbs, an apply's plan, and the rows of the
//! `show-*` verbs. These are the core's own types, made from the one list
//! of answers in netadm-model (`answers!`); netadmd converts them to the
//! D-Bus contract (`netadm-dbus`), made from the same list, at its
//! boundary, in one place.

/// Makes each answer of [`netadm_model::answers!`] a struct of the core's,
/// by its core name.
macro_rules! core_answers {
    ([$(#[$doc:meta])*] $core:ident => $bus:ident [$($derive:ident),*] [$([$(#[$fdoc:meta])*] $field:ident: $ty:ty,)*]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, $($derive),*)]
        pub struct $core {
            $( $(#[$fdoc])* pub $field: $ty, )*
        }
    };
}

netadm_model::answers!(core_answers);
