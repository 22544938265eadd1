//! The NBD (network block device) front end.
