//! Errors: a kind a script can branch on, and a message naming what was
//! wrong. The kinds map one to one onto `org.netadm.Netadm1.Error.*`.

use std::fmt;

/// What kind of failure; stable for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No such link, interface, address or property.
    NotFound,
    /// The object already exists.
    Exists,
    /// A name breaks the naming rules.
    InvalidName,
    /// An argument is malformed or inconsistent.
    InvalidArgument,
    /// A property value is out of range or not one of the choices.
    InvalidValue,
    /// Read-only, or not applicable to this link.
    NotSupported,
    /// In use by something else.
    Busy,
    /// The hardware refused or did not answer.
    Hardware,
    /// The configuration could not be persisted.
    Persistence,
    /// A bug.
    Internal,
}

impl ErrorKind {
    /// The kind's name, as in the D-Bus error name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::Exists => "Exists",
            Self::InvalidName => "InvalidName",
            Self::InvalidArgument => "InvalidArgument",
            Self::InvalidValue => "InvalidValue",
            Self::NotSupported => "NotSupported",
            Self::Busy => "Busy",
            Self::Hardware => "Hardware",
            Self::Persistence => "Persistence",
            Self::Internal => "Internal",
        }
    }
}

/// A failed operation. Whatever failed, state, hardware and configuration
/// are as they were before the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What was wrong, naming the objects involved.
    pub message: String,
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CoreError {}

impl CoreError {
    /// `self`, and that undoing what the failed operation did failed too
    /// (`undo`): the machine is not as it was, and the message says so
    /// ([`CoreError::left_changed`]).
    pub(crate) fn not_put_back(self, undo: &CoreError) -> Self {
        Self { kind: self.kind, message: format!("{}; {PUT_BACK_FAILED}{}", self.message, undo) }
    }

    /// Whether the failure left the machine changed: its undo failed too.
    pub(crate) fn left_changed(&self) -> bool {
        self.message.contains(PUT_BACK_FAILED) || self.message.contains(" back failed: ")
    }
}

/// How a failure whose undo failed too says so.
const PUT_BACK_FAILED: &str = "and putting it back failed: ";

macro_rules! ctor {
    ($($fn:ident => $kind:ident),* $(,)?) => {
        impl CoreError {
            $(
                #[doc = concat!("A [`ErrorKind::", stringify!($kind), "`] error.")]
                pub fn $fn(message: impl Into<String>) -> Self {
                    Self { kind: ErrorKind::$kind, message: message.into() }
                }
            )*
        }
    };
}

ctor! {
    not_found => NotFound,
    exists => Exists,
    invalid_name => InvalidName,
    invalid_argument => InvalidArgument,
    invalid_value => InvalidValue,
    not_supported => NotSupported,
    busy => Busy,
    hardware => Hardware,
    persistence => Persistence,
    internal => Internal,
}

impl From<netadm_model::LinkNameError> for CoreError {
    fn from(e: netadm_model::LinkNameError) -> Self {
        Self::invalid_name(e.to_string())
    }
}

impl From<netadm_model::PropError> for CoreError {
    fn from(e: netadm_model::PropError) -> Self {
        use netadm_model::PropError as P;
        match e {
            P::UnknownProp { .. } => Self::not_found(e.to_string()),
            P::ReadOnly { .. } | P::NotApplicable { .. } => Self::not_supported(e.to_string()),
            P::OutOfRange { .. }
            | P::NotANumber { .. }
            | P::NotABandwidth { .. }
            | P::BadChoice { .. }
            | P::WrongType { .. }
            | P::BadList { .. } => Self::invalid_value(e.to_string()),
            _ => Self::invalid_argument(e.to_string()),
        }
    }
}

impl From<netadm_rings::RingError> for CoreError {
    fn from(e: netadm_rings::RingError) -> Self {
        Self::hardware(e.to_string())
    }
}
