//! Where a stream lives.

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// A device a stream, event or buffer belongs to.
///
/// Text forms (parsed by [`FromStr`], printed canonically by [`Display`](fmt::Display)):
///
/// | text | place | prints as |
/// |---|---|---|
/// | `"cpu"` | `Place::Cpu` | `cpu` |
/// | `"gpu"`, `"gpu:N"`, `"cuda"`, `"cuda:N"` | `Place::Cuda(N)` | `cuda:N` |
/// | `"hip"`, `"hip:N"` | `Place::Hip(N)` | `hip:N` |
/// | `"wgpu"`, `"wgpu:N"` | `Place::Wgpu(N)` (N-th adapter) | `wgpu:N` |
/// | `"<type>"`, `"<type>:N"` | `Place::Custom { device_type, id: N }` | `<type>:N` |
///
/// A bare name means index 0. Device types of custom places are identifiers
/// (`[A-Za-z_][A-Za-z0-9_-]*`) that do not collide with the reserved names in any letter case.
///
/// ```
/// use devstream_core::Place;
/// assert_eq!("gpu".parse::<Place>().unwrap(), Place::Cuda(0));
/// assert_eq!("npu:1".parse::<Place>().unwrap().to_string(), "npu:1");
/// assert_eq!("custom_cpu".parse::<Place>().unwrap(),
///            Place::Custom { device_type: "custom_cpu".into(), id: 0 });
/// assert!("gpu:-1".parse::<Place>().is_err());
/// assert!("gpu:0:1".parse::<Place>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// The host CPU (the reference backend).
    Cpu,
    /// CUDA device with this ordinal.
    Cuda(usize),
    /// HIP (ROCm) device with this ordinal.
    Hip(usize),
    /// The n-th wgpu adapter of the backend's deterministic enumeration.
    Wgpu(usize),
    /// A custom device: a Paddle custom-device plug-in or a Rust-registered backend.
    Custom {
        /// The device type, e.g. `"custom_cpu"` or `"npu"`.
        device_type: String,
        /// The device index within that type.
        id: usize,
    },
}

/// Which backend family serves a [`Place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// `Place::Cpu`.
    Cpu,
    /// `Place::Cuda`.
    Cuda,
    /// `Place::Hip`.
    Hip,
    /// `Place::Wgpu`.
    Wgpu,
    /// `Place::Custom` (plug-ins and Rust-registered custom devices).
    Plugin,
}

impl BackendKind {
    /// Every backend kind, in a fixed order.
    pub const ALL: [BackendKind; 5] = [
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Hip,
        BackendKind::Wgpu,
        BackendKind::Plugin,
    ];

    /// The name used by `DEVSTREAM_REQUIRE` and the facade's cargo feature of the same name.
    ///
    /// ```
    /// assert_eq!(devstream_core::BackendKind::Plugin.name(), "plugin");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Hip => "hip",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Plugin => "plugin",
        }
    }

    /// Parses a backend name as used in `DEVSTREAM_REQUIRE`.
    pub fn from_name(name: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const RESERVED: [&str; 5] = ["cpu", "gpu", "cuda", "hip", "wgpu"];

impl Place {
    /// The backend family serving this place.
    pub fn backend(&self) -> BackendKind {
        match self {
            Place::Cpu => BackendKind::Cpu,
            Place::Cuda(_) => BackendKind::Cuda,
            Place::Hip(_) => BackendKind::Hip,
            Place::Wgpu(_) => BackendKind::Wgpu,
            Place::Custom { .. } => BackendKind::Plugin,
        }
    }

    /// The device index (0 for the CPU).
    pub fn index(&self) -> usize {
        match self {
            Place::Cpu => 0,
            Place::Cuda(n) | Place::Hip(n) | Place::Wgpu(n) => *n,
            Place::Custom { id, .. } => *id,
        }
    }

    /// A custom place, validating the device type like the parser does.
    ///
    /// ```
    /// let p = devstream_core::Place::custom("npu", 2).unwrap();
    /// assert_eq!(p.to_string(), "npu:2");
    /// assert!(devstream_core::Place::custom("cuda", 0).is_err());
    /// ```
    pub fn custom(device_type: &str, id: usize) -> Result<Place> {
        validate_device_type(device_type, device_type)?;
        Ok(Place::Custom {
            device_type: device_type.to_owned(),
            id,
        })
    }
}

fn invalid(text: &str, reason: impl Into<String>) -> Error {
    Error::InvalidPlace {
        text: text.to_owned(),
        reason: reason.into(),
    }
}

fn validate_device_type(text: &str, name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(invalid(
            text,
            format!("device type {name:?} is not an identifier ([A-Za-z_][A-Za-z0-9_-]*)"),
        ));
    }
    if let Some(reserved) = RESERVED.iter().find(|r| r.eq_ignore_ascii_case(name)) {
        return Err(invalid(
            text,
            format!("{name:?} is reserved; write it in lower case as {reserved:?}"),
        ));
    }
    Ok(())
}

fn parse_index(text: &str, index: &str) -> Result<usize> {
    if index.is_empty() {
        return Err(invalid(text, "missing device index after ':'"));
    }
    if index.starts_with('-') {
        return Err(invalid(text, format!("device index {index} is negative")));
    }
    if !index.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            text,
            format!("device index {index:?} is not a non-negative integer"),
        ));
    }
    index
        .parse::<usize>()
        .map_err(|_| invalid(text, format!("device index {index} is too large")))
}

impl FromStr for Place {
    type Err = Error;

    fn from_str(text: &str) -> Result<Place> {
        if text.is_empty() {
            return Err(invalid(text, "empty place"));
        }
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or_default();
        let index_text = parts.next();
        if parts.next().is_some() {
            return Err(invalid(
                text,
                "more than one ':' (expected name or name:index)",
            ));
        }
        if name.is_empty() {
            return Err(invalid(text, "missing device name before ':'"));
        }
        let index = match index_text {
            Some(i) => parse_index(text, i)?,
            None => 0,
        };
        match name {
            "cpu" => {
                if index != 0 {
                    return Err(invalid(
                        text,
                        "there is one CPU place: \"cpu\" (or \"cpu:0\")",
                    ));
                }
                Ok(Place::Cpu)
            }
            "gpu" | "cuda" => Ok(Place::Cuda(index)),
            "hip" => Ok(Place::Hip(index)),
            "wgpu" => Ok(Place::Wgpu(index)),
            other => {
                validate_device_type(text, other)?;
                Ok(Place::Custom {
                    device_type: other.to_owned(),
                    id: index,
                })
            }
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Cpu => f.write_str("cpu"),
            Place::Cuda(n) => write!(f, "cuda:{n}"),
            Place::Hip(n) => write!(f, "hip:{n}"),
            Place::Wgpu(n) => write!(f, "wgpu:{n}"),
            Place::Custom { device_type, id } => write!(f, "{device_type}:{id}"),
        }
    }
}

impl TryFrom<&str> for Place {
    type Error = Error;
    fn try_from(text: &str) -> Result<Place> {
        text.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_prints_canonically() {
        let cases = [
            ("cpu", Place::Cpu, "cpu"),
            ("cpu:0", Place::Cpu, "cpu"),
            ("gpu", Place::Cuda(0), "cuda:0"),
            ("gpu:3", Place::Cuda(3), "cuda:3"),
            ("cuda", Place::Cuda(0), "cuda:0"),
            ("cuda:1", Place::Cuda(1), "cuda:1"),
            ("hip:2", Place::Hip(2), "hip:2"),
            ("hip", Place::Hip(0), "hip:0"),
            ("wgpu:0", Place::Wgpu(0), "wgpu:0"),
            ("wgpu", Place::Wgpu(0), "wgpu:0"),
            ("npu", Place::custom("npu", 0).unwrap(), "npu:0"),
            (
                "custom_cpu:1",
                Place::custom("custom_cpu", 1).unwrap(),
                "custom_cpu:1",
            ),
            (
                "intel-gpu:0",
                Place::custom("intel-gpu", 0).unwrap(),
                "intel-gpu:0",
            ),
        ];
        for (text, place, shown) in cases {
            let parsed: Place = text.parse().unwrap();
            assert_eq!(parsed, place, "{text}");
            assert_eq!(parsed.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<Place>().unwrap(), place, "round trip {shown}");
        }
    }

    #[test]
    fn bad_text_is_a_typed_error() {
        for text in [
            "",
            "gpu:-1",
            "gpu:x",
            "gpu:0:1",
            ":0",
            "gpu:",
            "gpu: 0",
            "gpu:+1",
            "cpu:1",
            "CUDA:0",
            "Cpu",
            "1npu",
            "n pu",
            "npu:99999999999999999999999",
            "gpu:1.5",
            "::",
        ] {
            match text.parse::<Place>() {
                Err(Error::InvalidPlace { text: t, reason }) => {
                    assert_eq!(t, text);
                    assert!(!reason.is_empty());
                }
                other => panic!("{text:?} parsed as {other:?}"),
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn display_round_trips(kind in 0u8..5, index in 0usize..10_000, name in "[a-z_][a-z0-9_]{0,12}") {
            let place = match kind {
                0 => Place::Cpu,
                1 => Place::Cuda(index),
                2 => Place::Hip(index),
                3 => Place::Wgpu(index),
                _ => match Place::custom(&name, index) { Ok(p) => p, Err(_) => return Ok(()) },
            };
            proptest::prop_assert_eq!(place.to_string().parse::<Place>().unwrap(), place);
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,24}") {
            let _ = text.parse::<Place>();
        }
    }
}
