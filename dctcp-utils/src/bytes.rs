//! Plain C structs (bindgen's, integers and arrays of them) in and out of
//! BPF map values.

/// Reads a plain C struct out of a map value.
pub fn from_bytes<T: Copy + Default>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= std::mem::size_of::<T>())
        // SAFETY: T is a bindgen POD struct (integers and arrays of them), so
        // any bit pattern is valid; read_unaligned needs no alignment.
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// The field-wise sum of a per-CPU map value's copies, for a struct of u64
/// (or s64) counters only (nested structs of them included): the value the CPUs'
/// counts add up to. None if a copy is shorter than `T`.
pub fn sum_per_cpu<T: Copy + Default>(per_cpu: &[Vec<u8>]) -> Option<T> {
    let size = std::mem::size_of::<T>();
    assert_eq!(size % 8, 0, "sum_per_cpu: a struct of u64 counters only");
    let mut sum = vec![0u64; size / 8];
    for cpu in per_cpu {
        if cpu.len() < size {
            return None;
        }
        for (s, b) in sum.iter_mut().zip(cpu.chunks_exact(8)) {
            // Wrapping: a signed counter (an s64 sum) adds the same way.
            *s = s.wrapping_add(u64::from_ne_bytes(b.try_into().expect("8 bytes")));
        }
    }
    let bytes: Vec<u8> = sum.iter().flat_map(|v| v.to_ne_bytes()).collect();
    from_bytes(&bytes)
}

/// The bytes of a plain C struct, to write into a map value.
pub fn to_bytes<T: Copy>(value: &T) -> Vec<u8> {
    // SAFETY: T is a bindgen POD struct without padding-sensitive invariants.
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    #[repr(C)]
    struct Class {
        pkts: u64,
        dropped: u64,
    }

    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    #[repr(C)]
    struct Counters {
        pkts: u64,
        lost: u64,
        ect: Class,
    }

    #[test]
    fn per_cpu_counters_add_field_by_field_nested_ones_too() {
        let cpu = |k: u64| {
            to_bytes(&Counters {
                pkts: k,
                lost: 2 * k,
                ect: Class {
                    pkts: 0,
                    dropped: 3 * k,
                },
            })
        };
        let sum: Counters = sum_per_cpu(&[cpu(1), cpu(10), cpu(100)]).unwrap();
        assert_eq!((sum.pkts, sum.lost, sum.ect.dropped), (111, 222, 333));
        assert_eq!(sum.ect.pkts, 0);
        assert!(sum_per_cpu::<Counters>(&[cpu(1), vec![0; 8]]).is_none());
    }

    #[test]
    fn a_struct_comes_back_as_it_went_and_a_short_value_is_refused() {
        let c = Counters {
            pkts: 7,
            lost: 1,
            ect: Class {
                pkts: 5,
                dropped: 2,
            },
        };
        assert_eq!(from_bytes::<Counters>(&to_bytes(&c)), Some(c));
        assert_eq!(from_bytes::<Counters>(&to_bytes(&c)[..8]), None);
    }
}
