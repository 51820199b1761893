//! Placeholder until the lemon issue lands.
