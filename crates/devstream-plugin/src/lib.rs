//! devstream plugin (being written).
