//! Draining a BPF ring buffer on a timer.
//!
//! The programs of this project submit with BPF_RB_NO_WAKEUP (a wakeup per
//! record costs the producer microseconds on the packet path), so nothing
//! ever wakes an epoll reader: a thread consumes the ring every `period`
//! instead and hands over what it found in batches.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Result};
use libbpf_rs::{MapHandle, RingBufferBuilder};

use crate::bytes::from_bytes;

/// Records of type `T` (a struct of an interface header) drained from one ring.
pub struct RingDrainer<T> {
    stop: Arc<AtomicBool>,
    batches: Receiver<Vec<T>>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl<T: Copy + Default + Send + 'static> RingDrainer<T> {
    /// Starts draining `ring` every `period`. A record holds one `T` or a
    /// batch of them; a record shorter than `T` is skipped.
    pub fn spawn(ring: MapHandle, period: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, batches) = mpsc::channel();
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || -> Result<()> {
            // The callback runs on this thread, inside consume(): no lock.
            let batch = Rc::new(RefCell::new(Vec::<T>::new()));
            let sink = batch.clone();
            let mut builder = RingBufferBuilder::new();
            builder.add(&ring, move |data: &[u8]| {
                sink.borrow_mut().extend(records::<T>(data));
                0
            })?;
            let rb = builder.build()?;
            loop {
                // Read the flag before the last pass: a stop request still
                // gets everything produced up to it.
                let last = stopping.load(Ordering::Acquire);
                rb.consume()?;
                let got = batch.take();
                if !got.is_empty() && tx.send(got).is_err() {
                    return Ok(());
                }
                if last {
                    return Ok(());
                }
                std::thread::sleep(period);
            }
        });
        RingDrainer {
            stop,
            batches,
            thread: Some(thread),
        }
    }

    /// Every record drained so far, without waiting.
    pub fn take(&self) -> Vec<T> {
        let mut out = Vec::new();
        while let Ok(mut b) = self.batches.try_recv() {
            out.append(&mut b);
        }
        out
    }

    /// Waits up to `timeout` for the next batch, then adds any others ready.
    pub fn wait(&self, timeout: Duration) -> Vec<T> {
        match self.batches.recv_timeout(timeout) {
            Ok(mut first) => {
                first.append(&mut self.take());
                first
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => Vec::new(),
        }
    }

    /// Stops after a last pass over the ring; returns what was not taken yet.
    pub fn finish(mut self) -> Result<Vec<T>> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.take().expect("joined once");
        thread
            .join()
            .map_err(|_| anyhow!("ring buffer reader panicked"))??;
        Ok(self.take())
    }
}

impl<T> Drop for RingDrainer<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `T`s in one ring record: one, or a batch of them; a trailing part
/// shorter than `T` is skipped. (`T` is a C struct, never zero-sized.)
fn records<T: Copy + Default>(data: &[u8]) -> Vec<T> {
    data.chunks_exact(std::mem::size_of::<T>())
        .filter_map(from_bytes::<T>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::records;

    #[test]
    fn a_record_is_one_value_or_a_batch_of_them() {
        let batch: Vec<u8> = [1u32, 2, 3].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(records::<u32>(&batch), vec![1, 2, 3]);
        assert_eq!(records::<u32>(&batch[..4]), vec![1]);
        // Not a whole number of values: the whole ones only.
        assert_eq!(records::<u32>(&batch[..6]), vec![1]);
        assert_eq!(records::<u32>(&batch[..10]), vec![1, 2]);
        assert!(records::<u32>(&batch[..3]).is_empty());
        assert!(records::<u32>(&[]).is_empty());
    }
}
