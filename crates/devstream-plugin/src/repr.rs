//! What a custom-device place's object is: one made through a plug-in's C table (`Abi`), or
//! one of a custom device written in Rust and registered with `register_custom_device`
//! (`Rust`). Every public plug-in type (stream, event, flag, graph, buffers) wraps one.

/// A plug-in's object (`Abi`) or a Rust custom device's (`Rust`).
#[derive(Clone, Debug)]
pub(crate) enum Repr<Abi, Rust> {
    Abi(Abi),
    Rust(Rust),
}

impl<Abi, Rust> Repr<Abi, Rust> {
    /// `abi` of the plug-in's object, or `rust` of the Rust device's: for the operations that
    /// only forward to one or the other.
    pub(crate) fn either<'a, T>(
        &'a self,
        abi: impl FnOnce(&'a Abi) -> T,
        rust: impl FnOnce(&'a Rust) -> T,
    ) -> T {
        match self {
            Repr::Abi(object) => abi(object),
            Repr::Rust(object) => rust(object),
        }
    }
}
