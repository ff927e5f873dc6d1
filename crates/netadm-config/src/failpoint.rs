//! What a failpoint does when a test configures `return` on it (built only
//! with the `failpoints` feature; see the `fail` crate).
//!
//! `return` makes the step fail with the error it would report itself;
//! `return(abort)` ends the process there, as a power cut or kill -9 would
//! (the test then restarts netadmd and checks what the disk holds).

/// The error a failed step reports (`make` builds it), or no return at
/// all when the failpoint's argument is `abort`.
pub fn injected<T, E>(
    name: &str,
    arg: Option<String>,
    make: impl FnOnce(std::io::Error) -> E,
) -> Result<T, E> {
    if arg.as_deref() == Some("abort") {
        eprintln!("netadm failpoint {name}: abort");
        std::process::abort();
    }
    Err(make(std::io::Error::other(format!("failpoint {name}"))))
}
