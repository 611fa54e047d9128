//! How long a live migration takes, and whether KubeVirt lets it finish.
//!
//! Pre-copy migration sends the guest's memory while the guest keeps writing to it: it converges
//! at the bandwidth the dirty rate leaves, `memory / (bandwidth - dirty rate)`. KubeVirt aborts a
//! migration that makes no progress for `progressTimeout` seconds, and one that runs longer than
//! `completionTimeoutPerGiB` times its size in decimal GB, rounded up (`getVMIMigrationDataSize`
//! in `pkg/virt-launcher/virtwrap/manager.go`; the monitor's `processInflightMigration`, at HEAD
//! `handleLegacyConvergence`, in `pkg/virt-launcher/virtwrap/live-migration-source.go`). The
//! simulator's migrations take this long; evac orders evacuations by it.

/// How a migration ends, as estimated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimate {
    /// It converges after this many seconds.
    Completes(f64),
    /// It would run past the completion timeout, and is aborted after this many seconds.
    TimesOut(f64),
    /// The guest dirties memory as fast as it is sent: aborted at the progress timeout.
    NeverConverges(f64),
}

impl Estimate {
    /// How long until the migration ends, successfully or not, in seconds.
    pub fn seconds(self) -> f64 {
        match self {
            Self::Completes(s) | Self::TimesOut(s) | Self::NeverConverges(s) => s,
        }
    }

    /// Whether the VM ends on the target.
    pub fn completes(self) -> bool {
        matches!(self, Self::Completes(_))
    }
}

/// What a migration's duration depends on: the VM's memory and dirty rate (bytes, bytes per
/// second), the bandwidth (bytes per second), and KubeVirt's two timeouts (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigrationInputs {
    /// The guest's memory.
    pub memory: f64,
    /// How fast the guest writes to its memory.
    pub dirty_rate: f64,
    /// What one migration may send per second.
    pub bandwidth: f64,
    /// `completionTimeoutPerGiB`.
    pub completion_timeout_per_gib: u64,
    /// `progressTimeout`.
    pub progress_timeout: u64,
    /// At the completion timeout KubeVirt helps the migration complete (post-copy, or the guest
    /// paused: `allowWorkloadDisruption`, `handleLegacyConvergence`) rather than abort it: what is
    /// left of the memory then goes at the full bandwidth.
    pub assisted: bool,
}

/// Estimates one migration.
pub fn estimate(inputs: &MigrationInputs) -> Estimate {
    let gigabytes = (inputs.memory / 1e9).ceil().max(1.0);
    let timeout = inputs.completion_timeout_per_gib as f64 * gigabytes;
    let effective = inputs.bandwidth - inputs.dirty_rate;
    if effective <= 0.0 {
        return Estimate::NeverConverges(inputs.progress_timeout as f64);
    }
    let needed = inputs.memory / effective;
    if needed <= timeout {
        Estimate::Completes(needed)
    } else if inputs.assisted {
        let left = (inputs.memory - effective * timeout).max(0.0);
        Estimate::Completes(timeout + left / inputs.bandwidth)
    } else {
        Estimate::TimesOut(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: f64 = 1024.0 * 1024.0;
    const GI: f64 = 1024.0 * MI;

    fn inputs(memory: f64, dirty_rate: f64, bandwidth: f64) -> MigrationInputs {
        MigrationInputs {
            memory,
            dirty_rate,
            bandwidth,
            completion_timeout_per_gib: 150,
            progress_timeout: 150,
            assisted: false,
        }
    }

    /// (memory, dirty rate, bandwidth, estimate): memory over what the dirty rate leaves of the
    /// bandwidth; 150 s per started GB at most (16Gi is 17.2 GB: 18 × 150 s); the progress
    /// timeout when the guest dirties as fast as the link sends.
    #[test]
    fn memory_over_the_bandwidth_the_dirty_rate_leaves() {
        let rows = [
            (6.0 * GI, 22.0 * MI, 128.0 * MI, Estimate::Completes(6144.0 / 106.0)),
            (16.0 * GI, 104.0 * MI, 128.0 * MI, Estimate::Completes(16384.0 / 24.0)),
            (16.0 * GI, 124.0 * MI, 128.0 * MI, Estimate::TimesOut(18.0 * 150.0)),
            (1.0 * GI, 0.0, 1.0 * MI, Estimate::TimesOut(2.0 * 150.0)),
            (0.5 * GI, 0.0, 1.0 * MI, Estimate::TimesOut(150.0)),
            (4.0 * GI, 128.0 * MI, 128.0 * MI, Estimate::NeverConverges(150.0)),
            (4.0 * GI, 200.0 * MI, 128.0 * MI, Estimate::NeverConverges(150.0)),
            // Exactly at the completion timeout (1.5 GB in 2 x 150 s at 5 MB/s): KubeVirt aborts
            // only a migration that runs past it.
            (1.5e9, 0.0, 5e6, Estimate::Completes(300.0)),
        ];
        for (memory, dirty, bandwidth, expected) in rows {
            let got = estimate(&inputs(memory, dirty, bandwidth));
            match (got, expected) {
                (Estimate::Completes(a), Estimate::Completes(b)) => {
                    assert!((a - b).abs() < 1e-9, "{memory} {dirty} {bandwidth}: {a} != {b}")
                }
                _ => assert_eq!(got, expected, "{memory} {dirty} {bandwidth}"),
            }
        }
        // Helped at the completion timeout (post-copy): 4Gi at 60Mi/s dirtied over 64Mi/s does
        // 4 x 750 s = 3000Mi in the 750 s (5 GB x 150 s), then the 1096Mi left at 64Mi/s.
        let assisted = MigrationInputs { assisted: true, ..inputs(4.0 * GI, 60.0 * MI, 64.0 * MI) };
        assert_eq!(estimate(&assisted), Estimate::Completes(750.0 + 1096.0 / 64.0));
        let never = MigrationInputs { assisted: true, ..inputs(4.0 * GI, 64.0 * MI, 64.0 * MI) };
        assert_eq!(estimate(&never), Estimate::NeverConverges(150.0));
        assert!(estimate(&inputs(GI, 0.0, 64.0 * MI)).completes());
        assert!(!estimate(&inputs(GI, 64.0 * MI, 64.0 * MI)).completes());
        assert_eq!(Estimate::TimesOut(3.0).seconds(), 3.0);
        assert_eq!(Estimate::NeverConverges(4.0).seconds(), 4.0);
        assert_eq!(Estimate::Completes(5.0).seconds(), 5.0);
    }
}
