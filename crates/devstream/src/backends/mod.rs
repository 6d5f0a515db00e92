//! One small module per backend: which facade variant holds which backend handle type.

/// Implements [`Member`](crate::Member) for a backend's six handle types.
macro_rules! facade_variant {
    ($variant:ident: $stream:ty, $event:ty, $graph:ty, $flag:ty, $buffer:ty, $host:ty) => {
        $crate::backends::facade_variant!(@one $variant, $stream, $crate::Stream);
        $crate::backends::facade_variant!(@one $variant, $event, $crate::Event);
        $crate::backends::facade_variant!(@one $variant, $graph, $crate::Graph);
        $crate::backends::facade_variant!(@one $variant, $flag, $crate::Flag);
        $crate::backends::facade_variant!(@one $variant, $buffer, $crate::DeviceBuffer);
        $crate::backends::facade_variant!(@one $variant, $host, $crate::HostBuffer);
    };
    (@one $variant:ident, $ty:ty, $facade:ty) => {
        impl $crate::Member<$facade> for $ty {
            fn wrap(self) -> $facade {
                type Facade = $facade;
                Facade::$variant(self)
            }
            fn unwrap_ref(facade: &$facade) -> Option<&Self> {
                type Facade = $facade;
                #[allow(unreachable_patterns)]
                match facade {
                    Facade::$variant(inner) => Some(inner),
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use facade_variant;

#[cfg(feature = "cpu")]
mod cpu;

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(feature = "hip")]
mod hip;

#[cfg(feature = "wgpu")]
mod wgpu;

#[cfg(feature = "plugin")]
mod plugin;

#[cfg(feature = "template")]
pub(crate) mod template;

/// Makes the custom devices the facade brings (the template backend, cargo feature
/// `template`) known to the custom-device registry; called before every use of it.
#[cfg(feature = "plugin")]
#[inline]
pub(crate) fn register_custom_devices() {
    #[cfg(feature = "template")]
    template::register();
}
