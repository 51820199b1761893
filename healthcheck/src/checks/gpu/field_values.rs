//! NVML's field values (`nvmlDeviceGetFieldValues`), read through the raw
//! bindings: nvml-wrapper's `field_values_for` zeroes each request's scope,
//! and the C2C links and the NVLink throughput need it. The one place that
//! builds requests and decodes the answers' union.

use super::session::Failure;
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    nvmlFieldValue_t, nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT as UNSIGNED_INT,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG as UNSIGNED_LONG_LONG,
};

/// One field as NVML answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    Read(u64),
    /// The driver lacks the field.
    NotSupported,
    /// Any other answer: why, as NVML words it.
    Failed(String),
}

/// Asks for `requests` (field id, scope) of `device` in one call. The outer
/// `Err` is a GPU that is lost or needs a reset (the `gpu` check's own
/// verdict); the inner one a call that failed as a whole, `NotSupported`
/// where the library has no `nvmlDeviceGetFieldValues`.
pub fn read(
    nvml: &Nvml,
    device: &Device<'_>,
    requests: &[(u32, u32)],
) -> Result<Result<Vec<FieldValue>, Failure>, Failure> {
    let Ok(get) = nvml.lib().nvmlDeviceGetFieldValues.as_ref() else {
        return Ok(Err(Failure::NotSupported));
    };
    let mut values: Vec<nvmlFieldValue_t> = requests
        .iter()
        .map(|&(field, scope)| request(field, scope))
        .collect();
    // SAFETY: the handle is live while `device` borrows `nvml`; NVML writes
    // exactly `values.len()` values.
    let status = unsafe { get(device.handle(), values.len() as i32, values.as_mut_ptr()) };
    match nvml_try(status).map_err(Failure::from) {
        Ok(()) => Ok(Ok(values.iter().map(value_of).collect())),
        Err(f @ (Failure::Lost | Failure::ResetRequired)) => Err(f),
        Err(other) => Ok(Err(other)),
    }
}

fn request(field: u32, scope: u32) -> nvmlFieldValue_t {
    // SAFETY: a plain C struct of integers and a union of numbers, all valid
    // as zeroes.
    let mut value: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
    value.fieldId = field;
    value.scopeId = scope;
    value
}

fn value_of(value: &nvmlFieldValue_t) -> FieldValue {
    match nvml_try(value.nvmlReturn) {
        Ok(()) => {}
        Err(NvmlError::NotSupported) => return FieldValue::NotSupported,
        Err(e) => return FieldValue::Failed(Failure::from(e).to_string()),
    }
    // SAFETY: valueType says which member of the union NVML wrote.
    match value.valueType {
        UNSIGNED_INT => FieldValue::Read(u64::from(unsafe { value.value.uiVal })),
        UNSIGNED_LONG_LONG => FieldValue::Read(unsafe { value.value.ullVal }),
        other => FieldValue::Failed(format!("value type {other}")),
    }
}
