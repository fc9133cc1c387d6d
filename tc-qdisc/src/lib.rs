//! The lab switch: bottleneck shaping, ECN-marking backends (kernel qdiscs and
//! BPF markers) and queue probes. Filled in by the switch-and-lab work.
