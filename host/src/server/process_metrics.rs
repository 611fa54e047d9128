//! The `process_*` families every Prometheus client exports (client_golang's process collector:
//! CPU time, memory, descriptors, start time), read from `/proc` at each scrape.

use evac_evaluator::metrics::Process;
use evac_evaluator::Metrics;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// A process's registry, with the process collector in it.
pub fn metrics(process: Process) -> Metrics {
    let mut metrics = Metrics::new(process);
    metrics.register_collector(Box::new(ProcessCollector));
    metrics
}

/// Reads this process's figures on each scrape. Where `/proc` cannot be read (not Linux, a
/// restricted mount), the families are left out rather than reported wrong.
#[derive(Debug)]
struct ProcessCollector;

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(me) = procfs::process::Process::myself() else { return Ok(()) };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                cpu.metric_type(),
            )?)?;
            let resident = (stat.rss * procfs::page_size()) as f64;
            gauge(&mut encoder, "process_resident_memory_bytes", "Resident memory size in bytes", resident)?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                stat.vsize as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                let start = boot as f64 + stat.starttime as f64 / ticks;
                gauge(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds",
                    start,
                )?;
            }
        }
        if let Ok(open) = me.fd_count() {
            gauge(&mut encoder, "process_open_fds", "Number of open file descriptors", open as f64)?;
        }
        if let Ok(limits) = me.limits() {
            if let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit {
                gauge(
                    &mut encoder,
                    "process_max_fds",
                    "Maximum number of open file descriptors",
                    max as f64,
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The families client_golang's collector exports, with this process's figures.
    #[test]
    fn the_process_families_are_exported() {
        let text = metrics(Process::Serve).encode();
        for family in [
            "# TYPE process_cpu_seconds counter",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_virtual_memory_bytes gauge",
            "# TYPE process_start_time_seconds gauge",
            "# TYPE process_open_fds gauge",
            "# TYPE process_max_fds gauge",
        ] {
            assert!(text.contains(family), "{family} missing:\n{text}");
        }
        let value = |name: &str| -> f64 {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes ") > 1_000_000.0);
        assert!(value("process_open_fds ") >= 3.0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let started = value("process_start_time_seconds ");
        assert!(started <= now + 1.0 && started > now - 3600.0, "started {started}, now {now}");
    }
}
