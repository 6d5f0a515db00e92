//! devstream cuda (being written).
