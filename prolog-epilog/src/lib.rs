//! Placeholder until the Slurm-integration issue lands.
