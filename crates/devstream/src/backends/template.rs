//! The template backend (`crates/devstream-template`): registered as the custom device
//! `template` before the custom-device registry is first asked, so `template:0` is a place like
//! any plug-in's and reaches the facade through the one erased layer.

use std::sync::Once;

/// Registers the template backend once. A device type `template` already taken (by a plug-in
/// found first) leaves that one in place: the registry reports the conflict to whoever asks
/// for the place.
pub(crate) fn register() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        let _ = devstream_plugin::register_custom_device::<devstream_template::TemplateBackend>(
            devstream_template::DEVICE_TYPE,
        );
    });
}
