//! Python bindings: `ccbench._core`. JSON in, JSON out, so the boundary
//! stays one small, versionable contract (docs/interfaces.md).

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Run one simulation. Takes the resolved run config as JSON and returns the
/// result tables as JSON. Releases the GIL while it runs; with `cancel`, a
/// `Cancel` that another thread sets, it stops at its next sample with the
/// error "interrupted".
#[pyfunction]
#[pyo3(signature = (config_json, cancel=None))]
fn simulate(py: Python<'_>, config_json: &str, cancel: Option<PyRef<'_, Cancel>>) -> PyResult<String> {
    let input = config_json.to_owned();
    let flag = cancel.map(|c| c.0.clone());
    py.allow_threads(move || sim::simulate_json_cancellable(&input, flag)).map_err(PyValueError::new_err)
}

/// A stop flag for a running `simulate` (set from the thread that was
/// interrupted, so that the simulating thread returns and can be joined).
#[pyclass]
struct Cancel(sim::Cancel);

#[pymethods]
impl Cancel {
    #[new]
    fn new() -> Self {
        Cancel(Default::default())
    }

    /// Stop the run at its next sample.
    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Names of the congestion-control algorithms the simulator implements.
#[pyfunction]
fn algorithms() -> Vec<&'static str> {
    sim::cc::ALGORITHMS.to_vec()
}

/// Why the simulator cannot run the BPF object at `path` (one line), or
/// None when it can.
#[pyfunction]
fn bpf_check(path: &str) -> Option<String> {
    sim::cc::bpf::load(path).err()
}

/// The struct_ops map's name in a BPF object: (file offset of the name,
/// name, file offset of the u32 flags).
#[pyfunction]
fn bpf_ops_name(path: &str) -> PyResult<(usize, String, usize)> {
    let bytes = std::fs::read(path).map_err(|e| PyValueError::new_err(format!("{path}: {e}")))?;
    bpf::struct_ops_fields(&bytes).map_err(|e| PyValueError::new_err(e.0))
}

/// The largest receive window (bytes) a Linux receiver with an `rmem_bytes`
/// buffer advertises for segments of `mss` payload bytes and
/// `header_bytes` of headers: the window the simulator's senders fill.
#[pyfunction]
fn receive_window(mss: u32, header_bytes: u32, rmem_bytes: u64) -> u64 {
    sim::tcp::max_window(mss, header_bytes, rmem_bytes)
}

/// Names of the queue disciplines the simulator implements.
#[pyfunction]
fn qdiscs() -> Vec<&'static str> {
    netcore::qdisc::QDISCS.to_vec()
}

/// Run the link emulator of the linux backend in this process (in the
/// router namespace) until its stop time, SIGINT or SIGTERM; returns the
/// summary as JSON (docs/interfaces.md §4). Releases the GIL while it runs.
#[pyfunction]
fn emu_run(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let input = config_json.to_owned();
    py.allow_threads(move || emu::run_json(&input)).map_err(PyRuntimeError::new_err)
}

/// Run the load generator's server (receiver namespace) until its stop
/// time; per-flow bytes received as JSON (docs/interfaces.md §4).
#[pyfunction]
fn load_server(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let input = config_json.to_owned();
    py.allow_threads(move || load::server::run_json(&input)).map_err(PyRuntimeError::new_err)
}

/// Run every flow of one sender host and sample their TCP_INFO; per-flow
/// summaries and RPC rows as JSON (docs/interfaces.md §4).
#[pyfunction]
fn load_client(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let input = config_json.to_owned();
    py.allow_threads(move || load::client::run_json(&input)).map_err(PyRuntimeError::new_err)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_class::<Cancel>()?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(qdiscs, m)?)?;
    m.add_function(wrap_pyfunction!(receive_window, m)?)?;
    m.add_function(wrap_pyfunction!(emu_run, m)?)?;
    m.add_function(wrap_pyfunction!(bpf_check, m)?)?;
    m.add_function(wrap_pyfunction!(bpf_ops_name, m)?)?;
    m.add_function(wrap_pyfunction!(load_server, m)?)?;
    m.add_function(wrap_pyfunction!(load_client, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
