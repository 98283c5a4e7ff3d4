//! The `log` crate's records, into Envoy's log (`[dynamic_modules]`), as the wasm
//! filter's go to Envoy's `[wasm]` log.

use crate::abi::{self, log_level, ModuleBuffer};

struct EnvoyLog;

static LOGGER: EnvoyLog = EnvoyLog;

fn level(level: log::Level) -> u32 {
    match level {
        log::Level::Error => log_level::ERROR,
        log::Level::Warn => log_level::WARN,
        log::Level::Info => log_level::INFO,
        log::Level::Debug => log_level::DEBUG,
        log::Level::Trace => log_level::TRACE,
    }
}

impl log::Log for EnvoyLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        // SAFETY: no pointers.
        unsafe { abi::envoy_dynamic_module_callback_log_enabled(level(metadata.level())) }
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let message = format!("ferry: {}", record.args());
        // SAFETY: `message` outlives the call; Envoy copies it.
        unsafe {
            abi::envoy_dynamic_module_callback_log(
                level(record.level()),
                ModuleBuffer::of(message.as_bytes()),
            );
        }
    }

    fn flush(&self) {}
}

/// Installs the logger (once per process; a second call changes nothing).
pub fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}
