//! Decoding the input's first bytes: the plug-in config to load and how the plug-in misbehaves
//! during the iteration.

use super::*;

/// Every plug-in config an input can name: a fixed list (fewer than the instances a process
/// may load), so that an input means the same plug-in whatever ran before it in the process.
pub(crate) fn configs() -> &'static [Config] {
    static CONFIGS: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        use optional::*;
        let mut out = Vec::new();
        // Working plug-ins: every entry, or every entry but some (each fallback path).
        let masks = [
            ALL,
            ALL & !QUERY_STREAM,
            ALL & !QUERY_EVENT,
            ALL & !(QUERY_STREAM | QUERY_EVENT),
            ALL & !CALLBACK,
            ALL & !SYNC_STREAM,
            ALL & !WAIT_EVENT,
            ALL & !ASYNC_COPY,
            ALL & !SYNC_COPY,
            ALL & !HOST_MEMORY,
            ALL & !STREAMS,
            ALL & !CAPTURE,
            ALL & !INIT,
            ALL & !(CALLBACK | CAPTURE),
            // Like Paddle's own custom_cpu: null streams, no queries, callbacks or
            // stream synchronization, synchronous copies only.
            INIT | SYNC_COPY | WAIT_EVENT,
            SYNC_COPY,
        ];
        out.extend(masks.iter().map(|&mask| Config::working(mask)));
        let last = devstream_paddle_sys::KNOWN_LAYOUTS.len() - 1;
        for accept in [
            Accept::Neither,
            Accept::Pair(last),
            Accept::ParamsOnly(last),
            Accept::Paddle(0),
            Accept::Paddle(2),
        ] {
            out.push(Config {
                accept,
                ..Config::working(ALL)
            });
        }
        out.push(Config {
            devices: Devices::List(2),
            ..Config::working(ALL)
        });
        out.push(Config {
            init_device: InitDevice::Rewrite,
            sub_device_type: true,
            version: (0, 1, 7),
            ..Config::working(ALL)
        });
        out.push(Config {
            devices: Devices::List(2),
            init_device: InitDevice::Rewrite,
            ..Config::working(ALL & !(QUERY_STREAM | QUERY_EVENT))
        });
        // Plug-ins that fail to load, one way each.
        let broken = Config::working(ALL);
        out.extend([
            Config {
                accept: Accept::Refuse,
                ..broken
            },
            Config {
                accept: Accept::WriteThenRefuse,
                ..broken
            },
            Config {
                version: (0, 1, 0),
                ..broken
            },
            Config {
                version: (1, 0, 0),
                ..broken
            },
            Config {
                version: (0, 0, 0),
                ..broken
            },
            Config {
                version: (usize::MAX, 1, 1),
                ..broken
            },
            Config {
                name: DeviceTypeName::Null,
                ..broken
            },
            Config {
                name: DeviceTypeName::Invalid,
                ..broken
            },
            Config {
                name: DeviceTypeName::NotUtf8,
                ..broken
            },
            Config {
                beyond: true,
                ..broken
            },
            Config {
                replace_interface: true,
                ..broken
            },
            Config {
                params_beyond: true,
                ..broken
            },
            Config {
                initialize_fails: true,
                ..broken
            },
            Config {
                init_device: InitDevice::Fails,
                ..broken
            },
        ]);
        out.extend((0..10).map(|i| Config {
            missing_required: Some(i),
            ..broken
        }));
        out.extend(
            [
                Devices::CountFails,
                Devices::ListFails,
                Devices::Huge,
                Devices::Duplicate,
                Devices::BeyondCInt,
                Devices::WritesMore,
                Devices::List(0),
            ]
            .map(|devices| Config { devices, ..broken }),
        );
        assert!(out.len() <= plugin::MAX_INSTANCES);
        out
    })
}

pub(crate) fn decode_config(u: &mut Unstructured<'_>) -> Config {
    let configs = configs();
    // Mostly the plug-in with every entry.
    match byte(u) {
        0..=127 => configs[0],
        b => configs[usize::from(b) % configs.len()],
    }
}

/// `bytes` bytes of the input as a little-endian number (missing bytes are zero).
pub(crate) fn little_endian(u: &mut Unstructured<'_>, bytes: u32) -> u64 {
    (0..bytes).fold(0, |n, i| n | u64::from(byte(u)) << (8 * i))
}

pub(crate) fn decode_behaviour(u: &mut Unstructured<'_>) -> Behaviour {
    let seed = little_endian(u, 8);
    let mode = byte(u);
    if mode < 48 {
        return Behaviour {
            seed,
            ..Behaviour::default()
        };
    }
    let rate = byte(u);
    let calls = little_endian(u, 4) as u32;
    let odd_deliveries = byte(u);
    let deliveries = byte(u) & 0x1f;
    let reenter = byte(u);
    Behaviour {
        seed,
        rate: if mode & 1 == 0 { rate / 4 } else { rate },
        calls,
        odd_deliveries,
        deliveries: if mode & 2 == 0 {
            deliveries & !delivery::TWICE
        } else {
            deliveries
        },
        reenter: if mode & 4 == 0 { 0 } else { reenter / 2 },
    }
}
