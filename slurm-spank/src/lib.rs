//! Placeholder until the SPANK issue lands.
