//! Outpost wire protocol (work in progress).
