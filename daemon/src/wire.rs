//! The one place where the core and the D-Bus contract (`netadm-dbus`)
//! meet: the core's answers become the contract's types and its errors the
//! contract's typed errors ([`ToWire`]); the bus's arguments are lent to the
//! core's functions ([`Lend`]).

use netadm_core::{CoreError, ErrorKind};
use netadm_dbus as dbus;

/// A core value as the D-Bus contract carries it.
pub trait ToWire {
    /// Its type on the bus.
    type Wire: Send + 'static;
    /// Converts it.
    fn wire(self) -> Self::Wire;
}

/// A core error as the contract's typed error: kinds map one to one.
pub fn error(e: CoreError) -> dbus::Error {
    let m = e.message;
    match e.kind {
        ErrorKind::NotFound => dbus::Error::NotFound(m),
        ErrorKind::Exists => dbus::Error::Exists(m),
        ErrorKind::InvalidName => dbus::Error::InvalidName(m),
        ErrorKind::InvalidArgument => dbus::Error::InvalidArgument(m),
        ErrorKind::InvalidValue => dbus::Error::InvalidValue(m),
        ErrorKind::NotSupported => dbus::Error::NotSupported(m),
        ErrorKind::Busy => dbus::Error::Busy(m),
        ErrorKind::Hardware => dbus::Error::Hardware(m),
        ErrorKind::Persistence => dbus::Error::Persistence(m),
        ErrorKind::Internal => dbus::Error::Internal(m),
    }
}

/// Values the bus carries as they are.
macro_rules! same {
    ($($t:ty),*) => { $(impl ToWire for $t { type Wire = $t; fn wire(self) -> $t { self } })* };
}
same!(String, bool, u8, u16, u32, u64, f64);

impl<T: ToWire> ToWire for Vec<T> {
    type Wire = Vec<T::Wire>;
    fn wire(self) -> Self::Wire {
        self.into_iter().map(ToWire::wire).collect()
    }
}

impl<A: ToWire, B: ToWire> ToWire for (A, B) {
    type Wire = (A::Wire, B::Wire);
    fn wire(self) -> Self::Wire {
        (self.0.wire(), self.1.wire())
    }
}

impl<T: ToWire> ToWire for Result<T, CoreError> {
    type Wire = Result<T::Wire, dbus::Error>;
    fn wire(self) -> Self::Wire {
        self.map(ToWire::wire).map_err(error)
    }
}

/// A result the daemon decided itself (a by-name read's `NotFound`).
impl<T: ToWire> ToWire for Result<T, dbus::Error> {
    type Wire = Result<T::Wire, dbus::Error>;
    fn wire(self) -> Self::Wire {
        self.map(ToWire::wire)
    }
}

/// What a read answers on the bus: its rows as they are, or what a read
/// that can fail gave.
pub trait Answer {
    /// The answer when there is one.
    type Ok;
    /// The answer or the error.
    fn answer(self) -> Result<Self::Ok, dbus::Error>;
}

impl<T> Answer for Vec<T> {
    type Ok = Self;
    fn answer(self) -> Result<Self, dbus::Error> {
        Ok(self)
    }
}

impl<T> Answer for Result<T, dbus::Error> {
    type Ok = T;
    fn answer(self) -> Self {
        self
    }
}

/// How a bus argument is lent to the core function a method calls:
/// strings as `&str`, lists and maps by reference, numbers and flags by
/// value.
pub trait Lend {
    /// What the core function takes.
    type Out;
    /// Lends it.
    fn lend(self) -> Self::Out;
}

impl<'a> Lend for &'a String {
    type Out = &'a str;
    fn lend(self) -> &'a str {
        self
    }
}

impl<'a> Lend for &'a Vec<String> {
    type Out = &'a [String];
    fn lend(self) -> &'a [String] {
        self
    }
}

impl Lend for &std::collections::BTreeMap<String, String> {
    type Out = Self;
    fn lend(self) -> Self {
        self
    }
}

/// Arguments the core takes by value.
macro_rules! by_value {
    ($($t:ty),*) => { $(impl Lend for &$t { type Out = $t; fn lend(self) -> $t { *self } })* };
}
by_value!(bool, u16, u32, u64);

impl ToWire for std::collections::BTreeMap<String, u64> {
    type Wire = Self;
    fn wire(self) -> Self {
        self
    }
}

impl ToWire for std::collections::BTreeSet<String> {
    type Wire = Self;
    fn wire(self) -> Self {
        self
    }
}

/// Each answer of [`netadm_model::answers!`]: the core's type becomes the
/// bus's, field by field, each by its own [`ToWire`].
macro_rules! to_wire {
    ([$(#[$doc:meta])*] $core:ident => $bus:ident [$($derive:ident),*] [$([$(#[$fdoc:meta])*] $field:ident: $ty:ty,)*]) => {
        impl ToWire for netadm_core::$core {
            type Wire = dbus::$bus;
            fn wire(self) -> dbus::$bus {
                dbus::$bus { $($field: self.$field.wire()),* }
            }
        }
    };
}

netadm_model::answers!(to_wire);
