//! Python bindings: `ccbench._core`. JSON in, JSON out, so the boundary
//! stays one small, versionable contract (docs/interfaces.md).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Run one simulation. Takes the resolved run config as JSON and returns the
/// result tables as JSON. Releases the GIL while it runs.
#[pyfunction]
fn simulate(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let input = config_json.to_owned();
    py.allow_threads(move || sim::simulate_json(&input)).map_err(PyValueError::new_err)
}

/// Names of the congestion-control algorithms the simulator implements.
#[pyfunction]
fn algorithms() -> Vec<&'static str> {
    sim::cc::ALGORITHMS.to_vec()
}

/// Names of the queue disciplines the simulator implements.
#[pyfunction]
fn qdiscs() -> Vec<&'static str> {
    netcore::qdisc::QDISCS.to_vec()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(qdiscs, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
