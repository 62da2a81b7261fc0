//! Shared helpers for Outpost's workspace-level tests: locating binaries, the Python venv
//! with the official LiveKit SDK, and throw-away network namespaces.
