//! A linearizability checker for histories of reads and writes on registers.
